/**
 * Entry point of the authoring bundle: mounts the guardrail editor on #guardrail-editor.
 *
 * Contract (all data attributes of the mount element):
 *   data-schema-url      GET  guardrail.schema.json
 *   data-checks-url      GET  the check registry: [{id, kind, configSchema, builtin, pack, description}] or {results: [...]}
 *   data-validate-url    POST the document -> {valid, errors: [{path, message}], warnings}
 *   data-save-url        POST or PUT the document (data-save-method, default POST); 400 -> {errors}
 *   data-after-save-url  where to go after saving; "{id}" is replaced by the saved guardrail's id
 *   data-base-revision   the revision the editor was opened on; data-if-match its ETag, sent as
 *                        If-Match (412: someone saved meanwhile); data-diff-url the revision diff
 *                        page, data-edit-url this editor (to open the current revision)
 *   data-try-url         POST {guardrail, trace} -> a result {status, reason, ...}; 400 -> {errors}
 *   data-traces-url      GET  recent traces for Try it (optional); data-trace-url "/…/{id}" reads one
 *   data-cancel-url      a Cancel link (optional)
 *   data-csp-nonce       the page's CSP nonce, for the styles the JSON editor injects
 *   data-estimate-url    POST {guardrail, tenant} -> {preview, try}: the judge cost estimate of an llm-judge draft
 *   data-tenant          the tenant the editor works in (its estimate's), when there is one
 *   data-try-time-limit-s  seconds Try it may take on the server; the panel stops waiting a little after
 *   data-shadow-state    "new", "enforced" (both offer "Save in shadow": `?shadow=true` on the
 *                        save) or "shadow" (a save stays in shadow until promoted)
 * The initial document is the JSON of <script type="application/json" id="guardrail-initial">; the
 * console's runtime state beside it, that of id="guardrail-runtime": {stages (null: the check's
 * defaults), onError, stagesUrl, failModeUrl ("__id__" replaced by the saved guardrail's id)}.
 */
import { createRoot } from "react-dom/client";
import { Editor } from "./Editor.jsx";
import "./authoring.css";

function readJson(id) {
  const element = document.getElementById(id);
  if (!element) return {};
  try {
    const value = JSON.parse(element.textContent || "{}");
    return value && typeof value === "object" && !Array.isArray(value) ? value : {};
  } catch {
    return {};
  }
}

function readConfig(element) {
  const data = element.dataset;
  return {
    schemaUrl: data.schemaUrl,
    checksUrl: data.checksUrl,
    validateUrl: data.validateUrl || "",
    saveUrl: data.saveUrl,
    saveMethod: (data.saveMethod || "POST").toUpperCase() === "PUT" ? "PUT" : "POST",
    baseRevision: data.baseRevision ? Number(data.baseRevision) : null,
    ifMatch: data.ifMatch || "",
    diffUrl: data.diffUrl || "",
    editUrl: data.editUrl || "",
    afterSaveUrl: data.afterSaveUrl || "",
    tryUrl: data.tryUrl || "",
    tracesUrl: data.tracesUrl || "",
    traceUrl: data.traceUrl || "",
    cancelUrl: data.cancelUrl || "",
    cspNonce: data.cspNonce || "",
    previewUrl: data.previewUrl || "",
    shadowState: data.shadowState || "",
    estimateUrl: data.estimateUrl || "",
    tenant: data.tenant || "",
    tryTimeLimitS: data.tryTimeLimitS ? Number(data.tryTimeLimitS) : 0,
  };
}

function mount() {
  const element = document.getElementById("guardrail-editor");
  if (!element) return;
  const initialDoc = readJson(element.dataset.initial || "guardrail-initial");
  const runtime = readJson("guardrail-runtime");
  element.classList.add("kg-editor-root");
  createRoot(element).render(<Editor config={readConfig(element)} initialDoc={initialDoc} initialRuntime={runtime} />);
}

if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", mount);
else mount();
