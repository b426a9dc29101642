/**
 * The guardrail editor: a form generated from guardrail.schema.json, whose `config` part is
 * generated from the chosen check's config schema, a raw-JSON view of the same document,
 * live client validation, server validation whose JSON pointers land on fields, Try it, Save.
 */
import Form from "@rjsf/core";
import { useCallback, useEffect, useMemo, useRef, useState } from "react";
import { clientErrors, fieldDomId, mergeErrors, visibleErrors } from "./errors.js";
import { csrfToken, listItems, requestJson } from "../shared/http.js";
import { advancedFields, composeSchema, composeUiSchema, findCheck } from "./schema.js";
import { deepEqual, errorsToErrorSchema, formatJson, parseDocument, pointerTokens, pruneFormData, withOpenSections } from "./document.js";
import { validator } from "./validator.js";
import { JsonCodeEditor } from "./JsonCodeEditor.jsx";
import { ChoiceOrOtherWidget, FlagWidget, JsonField, OptionalDataControlsTemplate, RootObjectFieldTemplate, buttonTemplates } from "./widgets.jsx";
import { TryPanel } from "./TryPanel.jsx";
import { RuntimeSettings, runtimeProblems, saveRuntime, useRuntime } from "./Runtime.jsx";
import { JudgeCost } from "./JudgeCost.jsx";

const SERVER_CHECK_DELAY_MS = 600;
const FORM_BEHAVIOUR = {
  emptyObjectFields: "populateRequiredDefaults",
  arrayMinItems: { populate: "never" },
  constAsDefaults: "skipOneOf",
  mergeDefaultsIntoFormData: "useDefaultIfFormDataUndefined",
};
const fields = { json: JsonField };
const widgets = { flag: FlagWidget, choiceOrOther: ChoiceOrOtherWidget };
const templates = { ButtonTemplates: buttonTemplates, OptionalDataControlsTemplate, ObjectFieldTemplate: RootObjectFieldTemplate };

function useRegistry(config) {
  const [state, setState] = useState({ schema: null, checks: [], error: "" });
  useEffect(() => {
    Promise.all([requestJson(config.schemaUrl), requestJson(config.checksUrl)])
      .then(([schema, checks]) => setState({ schema: schema.body, checks: listItems(checks.body), error: "" }))
      .catch((failure) => setState({ schema: null, checks: [], error: failure.message }));
  }, [config.schemaUrl, config.checksUrl]);
  return state;
}

/** Posts the document to the validate endpoint a moment after the last change. */
function useServerValidation(url, doc) {
  const [state, setState] = useState({ pending: false, valid: null, errors: [], warnings: [], failure: "" });
  useEffect(() => {
    if (!url) return undefined;
    const controller = new AbortController();
    setState((current) => ({ ...current, pending: true }));
    const timer = window.setTimeout(async () => {
      try {
        const { body } = await requestJson(url, { method: "POST", body: doc, signal: controller.signal });
        setState({
          pending: false,
          valid: Boolean(body && body.valid),
          errors: (body && body.errors) || [],
          warnings: (body && body.warnings) || [],
          failure: "",
        });
      } catch (failure) {
        if (failure.name !== "AbortError") setState((current) => ({ ...current, pending: false, failure: failure.message }));
      }
    }, SERVER_CHECK_DELAY_MS);
    return () => {
      window.clearTimeout(timer);
      controller.abort();
    };
  }, [url, doc]);
  return [state, setState];
}


function focusField(path) {
  const element = document.getElementById(fieldDomId(path));
  if (element) {
    element.scrollIntoView({ block: "center" });
    element.focus();
  }
}

function warningText(warning) {
  return typeof warning === "string" ? warning : `${warning.path ? `${warning.path}: ` : ""}${warning.message || ""}`;
}

/** The server's verdict, once the author has started: nothing shouts at an untouched form. */
function ServerStatus({ state, shown, started }) {
  if (state.failure) return <span className="pill pill--error">Server check failed: {state.failure}</span>;
  if (!started) return null;
  if (state.pending) return <span className="kg-muted">Checking with the server…</span>;
  if (state.valid === null) return null;
  if (state.valid) return <span className="pill pill--pass">Valid on the server</span>;
  if (!shown) return <span className="pill pill--fail">Not valid yet</span>;
  return <span className="pill pill--fail">{shown} {shown === 1 ? "problem" : "problems"} to fix</span>;
}

/** Keeps the field that has the focus clear of the sticky save bar at the bottom. */
function useFocusAboveSaveBar(rootRef) {
  useEffect(() => {
    const onFocus = (event) => {
      const root = rootRef.current;
      const bar = root && root.querySelector(".kg-savebar");
      if (!bar || !root.contains(event.target) || bar.contains(event.target)) return;
      const fieldBottom = event.target.getBoundingClientRect().bottom;
      const barTop = bar.getBoundingClientRect().top;
      if (fieldBottom > barTop - 12) window.scrollBy(0, fieldBottom - barTop + 24);
    };
    document.addEventListener("focusin", onFocus);
    return () => document.removeEventListener("focusin", onFocus);
  }, [rootRef]);
}

function Problems({ errors, warnings }) {
  if (!errors.length && !warnings.length) return null;
  return (
    <div className="kg-server-problems" aria-live="polite">
      {errors.length ? (
        <ul className="kg-problems">
          {errors.map((error, index) => (
            <li key={index}>
              <button type="button" className="kg-linklike" onClick={() => focusField(error.path)}>
                <code>{error.path || "/"}</code>
              </button>{" "}
              {String(error.message)}
            </li>
          ))}
        </ul>
      ) : null}
      {warnings.length ? (
        <ul className="kg-warnings">
          {warnings.map((warning, index) => <li key={index}>{warningText(warning)}</li>)}
        </ul>
      ) : null}
    </div>
  );
}

function afterSaveUrl(template, id) {
  const encoded = encodeURIComponent(id);
  return template.replace("{id}", encoded).replace("__id__", encoded);
}

function RawJsonView({ text, error, errors, onChange, nonce }) {
  return (
    <div className="kg-raw">
      <span className="control-label" id="guardrail-raw-json-label">Guardrail document (JSON)</span>
      <JsonCodeEditor text={text} errors={errors} onChange={onChange} nonce={nonce} />
      <p id="guardrail-raw-json-status" className={error ? "kg-parse-error" : "kg-muted"} role={error ? "alert" : undefined}>
        {error || "The form and this JSON are the same document: edits in one show in the other."}
      </p>
    </div>
  );
}

const SIGNS = { add: ["+", "added"], del: ["-", "removed"], ctx: [" ", "unchanged"] };

/** The rows of a revision diff (the 412's `changes.lines`), drawn as the revision diff page draws them. */
function DiffRows({ changes }) {
  return (
    <div className="diff" role="region" aria-label={`Changes from revision ${changes.from} to ${changes.to}`}>
      <table>
        <tbody>
          {changes.lines.map((line, index) =>
            line.kind === "hunk" ? (
              <tr key={index} className="diff__line--hunk"><td colSpan={4}>{line.text}</td></tr>
            ) : (
              <tr key={index} className={`diff__line--${line.kind}`}>
                <td className="diff__num">{line.old ?? ""}</td>
                <td className="diff__num">{line.new ?? ""}</td>
                <td className="diff__sign" aria-label={(SIGNS[line.kind] || SIGNS.ctx)[1]}>{(SIGNS[line.kind] || SIGNS.ctx)[0]}</td>
                <td>{line.text}</td>
              </tr>
            ),
          )}
        </tbody>
      </table>
    </div>
  );
}

/** Someone saved the guardrail after this editor opened: who, what they changed, and the ways on. */
function SavedMeanwhile({ conflict, base, config, busy, onOverwrite }) {
  const ref = useRef(null);
  useEffect(() => {
    if (ref.current) ref.current.scrollIntoView({ block: "center" });
  }, [conflict]);
  const { current, changes } = conflict;
  const query = new URLSearchParams({ from: String(base), to: String(current.revision) });
  return (
    <div className="alert alert--warn kg-conflict" role="alert" ref={ref}>
      <p>
        <strong>Someone saved this guardrail meanwhile.</strong> {current.savedBy} saved revision {current.revision} after
        you opened revision {base}. Nothing of yours was saved; your changes are still here.
      </p>
      {changes && changes.lines.length ? (
        <>
          <p>What changed from revision {changes.from} to revision {changes.to}:</p>
          <DiffRows changes={changes} />
        </>
      ) : (
        <p>Revision {current.revision} holds the same document as revision {base}.</p>
      )}
      <p className="kg-conflict__actions">
        {config.diffUrl ? (
          <a href={`${config.diffUrl}?${query}`} target="_blank" rel="noopener">Open the revision diff</a>
        ) : null}
        {config.editUrl ? (
          <a className="btn btn--ghost" href={config.editUrl}>Discard mine, edit revision {current.revision}</a>
        ) : null}
        <button type="button" className="btn" onClick={onOverwrite} disabled={busy}>
          Save mine over revision {current.revision}
        </button>
      </p>
    </div>
  );
}

/** What the author touched, and whether they tried to save: the errors shown follow both. */
function useTouched() {
  const [touched, setTouched] = useState(() => new Set());
  const touch = useCallback((id) => {
    if (!id) return;
    setTouched((current) => (current.has(id) ? current : new Set([...current, id])));
  }, []);
  return [touched, touch];
}

/** The sections whose "+ Add" the author pressed (DOM ids): open while still empty, never `{}` in the document. */
function useOpenedSections() {
  const [opened, setOpened] = useState(() => new Set());
  const setSection = useCallback((id, open) => {
    setOpened((current) => {
      if (current.has(id) === open) return current;
      const next = new Set(current);
      if (open) next.add(id);
      else [...next].filter((other) => other === id || other.startsWith(`${id}_`)).forEach((other) => next.delete(other));
      return next;
    });
  }, []);
  return [opened, setSection];
}

export function Editor({ config, initialDoc, initialRuntime }) {
  const registry = useRegistry(config);
  const [runtime, setRuntime, runtimeStart] = useRuntime(initialRuntime);
  const [doc, setDoc] = useState(initialDoc);
  const [view, setView] = useState("form");
  const [rawText, setRawText] = useState(() => formatJson(initialDoc));
  const [rawError, setRawError] = useState("");
  const [saveState, setSaveState] = useState({ busy: false, message: "", errors: null });
  // The revision this editor's changes are made on (its If-Match), and a 412's answer.
  const [base, setBase] = useState({ revision: config.baseRevision, ifMatch: config.ifMatch });
  const [conflict, setConflict] = useState(null);
  const [submitted, setSubmitted] = useState(false);
  const [touched, touch] = useTouched();
  const [server, setServer] = useServerValidation(config.validateUrl, doc);
  const docRef = useRef(doc);
  const rootRef = useRef(null);
  docRef.current = doc;
  useFocusAboveSaveBar(rootRef);

  const check = findCheck(registry.checks, doc.check);
  const schema = useMemo(
    () => registry.schema && composeSchema(registry.schema, registry.checks, doc.kind, doc.check),
    [registry.schema, registry.checks, doc.kind, doc.check],
  );
  const advanced = useMemo(() => (schema ? advancedFields(schema, doc.kind, check) : []), [schema, doc.kind, check]);
  const uiSchema = useMemo(() => schema && composeUiSchema(schema, advanced), [schema, advanced]);
  const [opened, setSection] = useOpenedSections();
  const formData = useMemo(() => (schema ? withOpenSections(doc, schema, schema, opened) : doc), [doc, schema, opened]);
  const allErrors = useMemo(() => {
    const client = schema ? clientErrors(validator, schema, doc) : [];
    return mergeErrors(client, saveState.errors || server.errors);
  }, [schema, doc, saveState.errors, server.errors]);
  const shownErrors = useMemo(() => visibleErrors(allErrors, touched, submitted), [allErrors, touched, submitted]);
  const extraErrors = useMemo(() => errorsToErrorSchema(shownErrors), [shownErrors]);
  const advancedWithErrors = shownErrors.some((error) => advanced.includes(pointerTokens(error.path)[0]));
  const formContext = useMemo(() => ({ openAdvanced: advancedWithErrors, setSection }), [advancedWithErrors, setSection]);
  const unplaced = shownErrors.filter((error) => !pointerTokens(error.path).length || !(schema && schema.properties && pointerTokens(error.path)[0] in schema.properties));

  const replaceDoc = useCallback((next) => {
    setSaveState((current) => (current.errors ? { ...current, errors: null } : current));
    setDoc(next);
  }, []);

  const onFormChange = useCallback(
    (event, id) => {
      touch(id);
      const previous = docRef.current;
      let next = pruneFormData(event.formData, previous);
      if (next.check !== previous.check && previous.check !== undefined) {
        // A config belongs to its check: the new check's sub-form starts empty.
        const { config: _dropped, ...rest } = next;
        next = rest;
      }
      if (deepEqual(next, previous)) return;
      setRawText(formatJson(next));
      setRawError("");
      replaceDoc(next);
    },
    [replaceDoc, touch],
  );

  const onRawChange = (text) => {
    setRawText(text);
    const parsed = parseDocument(text);
    setRawError(parsed.error || "");
    if (parsed.doc && !deepEqual(parsed.doc, docRef.current)) {
      Object.keys(parsed.doc).forEach((key) => touch(fieldDomId(`/${key}`)));
      replaceDoc(parsed.doc);
    }
  };

  const showForm = () => {
    setView("form");
    if (!rawError) setRawText(formatJson(docRef.current));
  };

  const saveOn = async (basis, inShadow = false) => {
    setSubmitted(true);
    const runtimeErrors = runtimeProblems(runtime, doc);
    if (runtimeErrors.length) {
      setSaveState({ busy: false, message: `Not saved: ${runtimeErrors[0].message}.`, errors: null });
      return;
    }
    setSaveState({ busy: true, message: "", errors: null });
    try {
      const headers = basis.ifMatch ? { "If-Match": basis.ifMatch } : undefined;
      // An edit that changes only the runtime settings makes no new revision of the document
      // (unless it is saved in shadow: that makes the shadow revision).
      const unchanged = config.saveMethod === "PUT" && !conflict && !inShadow && deepEqual(doc, initialDoc);
      // In shadow: the new revision is evaluated and recorded, never enforced until promoted.
      const url = inShadow ? withParam(config.saveUrl, "shadow", "true") : config.saveUrl;
      const { status, body } = unchanged
        ? { status: 200, body: { id: doc.id } }
        : await requestJson(url, { method: config.saveMethod, body: doc, headers });
      if (status === 412 && body && body.current) {
        // Someone saved since basis.revision: nothing was saved; show what they changed.
        setConflict(body);
        setSaveState({ busy: false, message: "Not saved: someone saved this guardrail meanwhile.", errors: null });
        setView("form");
        return;
      }
      setConflict(null);
      if (status >= 400) {
        // 400 invalid, 409 an id already taken, 403/404 no longer allowed: nothing was saved.
        const errors = (body && body.errors) || [{ path: "", message: `The console refused the guardrail (HTTP ${status}).` }];
        setSaveState({ busy: false, message: `Not saved: ${errors.length} ${errors.length === 1 ? "problem" : "problems"} to fix.`, errors });
        setView("form");
        return;
      }
      const id = (body && body.id) || doc.id;
      const runtimeRefused = await saveRuntime(initialRuntime || {}, id, runtime, runtimeStart, config.saveMethod === "POST").catch(
        (failure) => [{ path: "", message: failure.message }],
      );
      if (runtimeRefused.length) {
        // The document is saved; the runtime state is not: say so and stay on the page.
        const shown = runtimeRefused.map((problem) => `${problem.path || "runtime"}: ${problem.message}`).join("; ");
        setSaveState({ busy: false, message: `Saved the guardrail, not its runtime settings: ${shown}`, errors: null });
        return;
      }
      setSaveState({ busy: false, message: "Saved.", errors: null });
      if (config.afterSaveUrl) window.location.assign(`${afterSaveUrl(config.afterSaveUrl, id)}?saved=1`);
    } catch (failure) {
      setSaveState({ busy: false, message: failure.message, errors: null });
    }
  };
  const save = () => saveOn(base);
  const saveInShadow = () => saveOn(base, true);
  const overwrite = () => {
    // The author has seen the other revision and keeps theirs: it is made on that revision now.
    const next = { revision: conflict.current.revision, ifMatch: conflict.current.etag };
    setBase(next);
    setConflict(null);
    saveOn(next);
  };

  if (registry.error) return <div className="alert alert--error">Could not load the guardrail schema: {registry.error}</div>;
  if (!schema) return <div className="kg-loading">Loading the guardrail schema…</div>;

  return (
    <div className="kg-editor" ref={rootRef}>
      <section className="card kg-editor__main">
        <header className="card__header kg-editor__header">
          <div className="kg-tabs" role="tablist" aria-label="Editor view">
            <button type="button" role="tab" aria-selected={view === "form"} className="kg-tab" onClick={showForm}>Form</button>
            <button type="button" role="tab" aria-selected={view === "json"} className="kg-tab" onClick={() => setView("json")}>JSON</button>
          </div>
          <ServerStatus state={server} shown={shownErrors.length} started={submitted || touched.size > 0} />
        </header>
        <div className="card__body">
          {conflict ? (
            <SavedMeanwhile conflict={conflict} base={base.revision} config={config} busy={saveState.busy} onOverwrite={overwrite} />
          ) : null}
          {check && check.description ? (
            <p className="kg-check-note"><strong>{check.id}</strong>: {check.description}</p>
          ) : null}
          <JudgeCost config={config} doc={doc} />
          {view === "json" ? (
            <RawJsonView text={rawText} error={rawError} errors={shownErrors} onChange={onRawChange} nonce={config.cspNonce} />
          ) : (
            <>
              {rawError ? <div className="alert alert--warn">The JSON view holds a parse error; the form shows the last valid document.</div> : null}
              <Form
                schema={schema}
                uiSchema={uiSchema}
                formData={formData}
                validator={validator}
                fields={fields}
                widgets={widgets}
                templates={templates}
                formContext={formContext}
                onChange={onFormChange}
                onBlur={touch}
                onSubmit={save}
                extraErrors={extraErrors}
                liveValidate={false}
                showErrorList={false}
                noHtml5Validate
                experimental_defaultFormStateBehavior={FORM_BEHAVIOUR}
                className="kg-form"
              />
            </>
          )}
          <Problems errors={view === "json" ? shownErrors : unplaced} warnings={saveState.errors ? [] : server.warnings} />
          {initialRuntime && initialRuntime.stagesUrl ? (
            <RuntimeSettings runtime={runtime} onChange={setRuntime} check={check} doc={doc} />
          ) : null}
        </div>
        <footer className="card__footer kg-savebar">
          <span className="kg-savebar__message" role="status">{saveState.message}</span>
          {config.cancelUrl ? <a className="btn btn--ghost" href={config.cancelUrl}>Cancel</a> : null}
          {config.previewUrl ? (
            <form method="post" action={config.previewUrl} target="_blank" className="kg-preview-form">
              <input type="hidden" name="csrfmiddlewaretoken" value={csrfToken()} />
              <input type="hidden" name="draft" value={formatJson(doc)} />
              <button type="submit" className="btn" disabled={Boolean(rawError)}>Preview impact</button>
            </form>
          ) : null}
          {config.shadowState === "enforced" || config.shadowState === "new" ? (
            <button
              type="button"
              className="btn"
              onClick={saveInShadow}
              disabled={saveState.busy || Boolean(rawError)}
              title={config.shadowState === "new" ? "Evaluated and recorded, never enforced until promoted" : "The enforced revision stays enforced; this one runs in shadow beside it until promoted"}
            >
              Save in shadow
            </button>
          ) : null}
          <button type="button" className="btn btn--primary" onClick={save} disabled={saveState.busy || Boolean(rawError)}>
            {saveState.busy ? "Saving…" : config.shadowState === "shadow" ? "Save in shadow" : "Save guardrail"}
          </button>
        </footer>
      </section>
      {config.tryUrl ? (
        <TryPanel config={config} doc={doc} onGuardrailErrors={(errors) => setServer((current) => ({ ...current, errors }))} />
      ) : null}
    </div>
  );
}

/** `url` with the query parameter `name=value` added. */
function withParam(url, name, value) {
  return `${url}${url.includes("?") ? "&" : "?"}${encodeURIComponent(name)}=${encodeURIComponent(value)}`;
}
