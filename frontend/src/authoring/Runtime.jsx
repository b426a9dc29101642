/**
 * The console's runtime state beside the document: the stages of a turn at which the
 * guardrail applies (`POST evaluate?stage=`) and what an `error` does to the turn. Neither is
 * part of the 1.1.0 document (the export is unchanged); both are saved after the document,
 * through `guardrails/{id}/stages` and `guardrails/{id}/fail-mode`.
 */
import { useState } from "react";
import { requestJson } from "../shared/http.js";

export const STAGES = [
  { id: "input", label: "Input", hint: "before the model runs" },
  { id: "tool-call", label: "Tool call", hint: "before a proposed call runs" },
  { id: "output", label: "Output", hint: "the whole turn, with its answer" },
];

const DEFAULT_STAGES = ["output"];

/** The state the editor keeps: `stages` null while the check's defaults apply. */
export function useRuntime(initial) {
  const start = {
    stages: Array.isArray(initial && initial.stages) ? initial.stages : null,
    onError: initial && initial.onError === "halt" ? "halt" : "pass",
  };
  const [runtime, setRuntime] = useState(start);
  return [runtime, setRuntime, start];
}

function halts(doc) {
  return Boolean(doc && doc.action && doc.action["on-violation"] === "halt");
}

function ordered(stages) {
  return STAGES.map((stage) => stage.id).filter((id) => stages.includes(id));
}

/** The check's own stages (from `GET checks`), shown while no others are chosen. */
export function checkStages(check) {
  return check && Array.isArray(check.stages) && check.stages.length ? check.stages : DEFAULT_STAGES;
}

export function RuntimeSettings({ runtime, onChange, check, doc }) {
  const defaults = checkStages(check);
  const usingDefaults = runtime.stages === null;
  const shown = usingDefaults ? defaults : runtime.stages;
  const canHalt = halts(doc);
  const toggle = (id) => {
    const next = shown.includes(id) ? shown.filter((stage) => stage !== id) : ordered([...shown, id]);
    onChange({ ...runtime, stages: next });
  };
  return (
    <fieldset className="kg-runtime" aria-describedby="kg-runtime-note">
      <legend>At runtime</legend>
      <p className="kg-runtime__note muted" id="kg-runtime-note">
        Where a runtime's check of a turn applies this guardrail, and what an error does to the turn. CI and
        evaluation runs check whole traces with every guardrail, whatever is chosen here.
      </p>
      <div className="kg-runtime__group" role="group" aria-label="Stages">
        <span className="kg-runtime__label">Stages</span>
        <label className="kg-runtime__choice">
          <input
            type="checkbox"
            name="runtime-defaults"
            checked={usingDefaults}
            onChange={(event) => onChange({ ...runtime, stages: event.target.checked ? null : [...defaults] })}
          />{" "}
          The check's stages ({defaults.join(", ")})
        </label>
        {STAGES.map((stage) => (
          <label key={stage.id} className="kg-runtime__choice">
            <input
              type="checkbox"
              name="runtime-stage"
              value={stage.id}
              checked={shown.includes(stage.id)}
              disabled={usingDefaults}
              onChange={() => toggle(stage.id)}
            />{" "}
            {stage.label} <span className="muted">({stage.hint})</span>
          </label>
        ))}
        {!usingDefaults && !runtime.stages.length ? (
          <p className="kg-runtime__error" role="alert">Choose at least one stage, or the check's stages.</p>
        ) : null}
      </div>
      <div className="kg-runtime__group" role="radiogroup" aria-label="On error">
        <span className="kg-runtime__label">On error</span>
        <label className="kg-runtime__choice">
          <input
            type="radio"
            name="runtime-on-error"
            value="pass"
            checked={runtime.onError === "pass"}
            onChange={() => onChange({ ...runtime, onError: "pass" })}
          />{" "}
          Pass: the turn goes on
        </label>
        <label className="kg-runtime__choice">
          <input
            type="radio"
            name="runtime-on-error"
            value="halt"
            checked={runtime.onError === "halt"}
            disabled={!canHalt && runtime.onError !== "halt"}
            onChange={() => onChange({ ...runtime, onError: "halt" })}
          />{" "}
          Halt: fail closed <span className="muted">(only for a guardrail whose action is halt)</span>
        </label>
      </div>
    </fieldset>
  );
}

/** The runtime state's problems before saving (a path and a message, as the console's). */
export function runtimeProblems(runtime, doc) {
  const problems = [];
  if (runtime.stages !== null && !runtime.stages.length) {
    problems.push({ path: "/stages", message: "choose at least one stage, or the check's stages" });
  }
  if (runtime.onError === "halt" && !halts(doc)) {
    problems.push({ path: "/onError", message: "fail closed (halt on error) is only for a guardrail whose action is halt" });
  }
  return problems;
}

/**
 * Saves what changed of the runtime state once the document is saved under `id`: returns
 * the problems the console answered (an empty list when all was saved).
 */
export async function saveRuntime(urls, id, runtime, start, isNew) {
  const problems = [];
  const at = (template) => template.replace("__id__", encodeURIComponent(id).replace(/%2F/g, "/"));
  const stagesChanged = isNew ? runtime.stages !== null : JSON.stringify(runtime.stages) !== JSON.stringify(start.stages);
  if (urls.stagesUrl && stagesChanged) {
    const { status, body } = await requestJson(at(urls.stagesUrl), { method: "POST", body: { stages: runtime.stages } });
    if (status >= 400) problems.push(...((body && body.errors) || [{ path: "/stages", message: `HTTP ${status}` }]));
  }
  const onErrorChanged = isNew ? runtime.onError !== "pass" : runtime.onError !== start.onError;
  if (urls.failModeUrl && onErrorChanged) {
    const { status, body } = await requestJson(at(urls.failModeUrl), { method: "PUT", body: { onError: runtime.onError } });
    if (status >= 400) problems.push(...((body && body.errors) || [{ path: "/onError", message: `HTTP ${status}` }]));
  }
  return problems;
}
