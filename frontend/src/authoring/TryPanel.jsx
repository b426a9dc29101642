/**
 * "Try it": runs the guardrail being edited against a pasted or recent trace, before saving.
 * Trace content is only ever put into text nodes and a textarea: model output is untrusted.
 */
import { useEffect, useState } from "react";
import { listItems, requestJson } from "../shared/http.js";
import { describeParseError, formatJson } from "./document.js";

const STATUSES = new Set(["pass", "fail", "error", "skipped"]);

function traceLabel(item) {
  const parts = [item.id || item.trace_id || item.traceId];
  if (item.agent) parts.push(item.agent);
  if (item.flow) parts.push(item.flow);
  const when = item.startedAt || item.started_at || item.createdAt || item.created_at;
  if (when) parts.push(String(when).replace("T", " ").slice(0, 16));
  return parts.filter(Boolean).join(" · ");
}

function traceDetailUrl(config, item) {
  if (item.url) return item.url;
  const id = encodeURIComponent(item.id);
  if (config.traceUrl) return config.traceUrl.replace("{id}", id).replace("__id__", id);
  const base = new URL(config.tracesUrl, window.location.href);
  return `${base.pathname.replace(/\/$/, "")}/${id}`;
}

/**
 * A trace detail answer is the trace itself, `{trace: {...}}`, or the console's stored trace
 * `{id, tenant, …, document: {...}}` whose `document` is the RunTrace as received.
 */
function unwrapTrace(body) {
  if (!body || typeof body !== "object") return body;
  if (typeof body.trace === "object" && body.trace !== null) return body.trace;
  if (typeof body.document === "object" && body.document !== null && !Array.isArray(body.document)) return body.document;
  return body;
}

/** The mode a draft is tried in by default: runtime for a runtime-only scope, else ci. */
function defaultMode(doc) {
  return doc && doc.scope && doc.scope.when === "runtime-only" ? "runtime" : "ci";
}

/** What the judge said and cost, when an llm-judge draft was judged. */
function JudgeView({ details }) {
  if (!details || !details.model) return null;
  const tokens = [details.inputTokens, details.outputTokens].every((n) => n !== undefined && n !== null)
    ? `${details.inputTokens} in / ${details.outputTokens} out tokens` : "tokens not reported";
  return (
    <p className="kg-muted kg-try-judge">
      {`Judge ${details.model}: ${details.verdict || (details.score !== null && details.score !== undefined ? `score ${details.score}` : "no verdict")}`}
      {details.judgeReason ? ` (${String(details.judgeReason)})` : ""}
      {details.cached ? " · answered from the cache, no cost" : ` · ${tokens} · $${details.costUsd || "0"}`}
    </p>
  );
}

function ResultView({ result }) {
  const status = STATUSES.has(result.status) ? result.status : "error";
  return (
    <div className="kg-try-result" role="status">
      <span className={`pill pill--${status}`}>{status}</span>
      <p className="kg-try-reason">{result.reason ? String(result.reason) : status === "pass" ? "The trace satisfies this guardrail." : "No reason given."}</p>
      <JudgeView details={result.details} />
      {result.durationMs !== undefined || result.costUsd !== undefined ? (
        <p className="kg-muted">
          {result.durationMs !== undefined ? `${result.durationMs} ms` : ""}
          {result.costUsd !== undefined ? ` · $${Number(result.costUsd).toFixed(4)}` : ""}
        </p>
      ) : null}
    </div>
  );
}

const SEARCH_DELAY_MS = 300;

/** The picker's URL: the search words and the chosen check added to data-traces-url. */
function pickerUrl(tracesUrl, search, check) {
  const url = new URL(tracesUrl, window.location.href);
  if (search) url.searchParams.set("q", search);
  if (check) url.searchParams.set("check", check);
  return url.pathname + url.search;
}

/** Traces to try against, fetched again (after a pause) when the search or the check changes. */
function useRecentTraces(tracesUrl, search, check) {
  const [traces, setTraces] = useState([]);
  const [error, setError] = useState("");
  useEffect(() => {
    if (!tracesUrl) return undefined;
    const controller = new AbortController();
    const timer = window.setTimeout(() => {
      requestJson(pickerUrl(tracesUrl, search, check), { signal: controller.signal })
        .then(({ body }) => {
          setTraces(listItems(body).filter((item) => item && item.id));
          setError("");
        })
        .catch((failure) => {
          if (failure.name !== "AbortError") setError(failure.message);
        });
    }, search ? SEARCH_DELAY_MS : 0);
    return () => {
      window.clearTimeout(timer);
      controller.abort();
    };
  }, [tracesUrl, search, check]);
  return [traces, error];
}

function TraceOptions({ traces }) {
  const failed = traces.filter((trace) => trace.failed);
  const others = traces.filter((trace) => !trace.failed);
  const options = (items) => items.map((trace) => <option key={trace.id} value={String(trace.id)}>{traceLabel(trace)}</option>);
  if (!failed.length) return options(others);
  return (
    <>
      <optgroup label="Recently failed this check">{options(failed)}</optgroup>
      {others.length ? <optgroup label="Newest">{options(others)}</optgroup> : null}
    </>
  );
}

export function TryPanel({ config, doc, onGuardrailErrors }) {
  const [search, setSearch] = useState("");
  const [traces, tracesError] = useRecentTraces(config.tracesUrl, search.trim(), doc.check || "");
  const [traceText, setTraceText] = useState("");
  const [picked, setPicked] = useState("");
  const [busy, setBusy] = useState(false);
  const [result, setResult] = useState(null);
  const [problems, setProblems] = useState([]);
  const [mode, setMode] = useState(defaultMode(doc));
  const scopeWhen = doc && doc.scope ? doc.scope.when : undefined;
  useEffect(() => setMode(defaultMode(doc)), [scopeWhen]);

  const pickTrace = async (event) => {
    const id = event.target.value;
    setPicked(id);
    const item = traces.find((trace) => String(trace.id) === id);
    if (!item) return;
    setProblems([]);
    try {
      const { body } = await requestJson(traceDetailUrl(config, item));
      setTraceText(formatJson(unwrapTrace(body)));
    } catch (failure) {
      setProblems([failure.message]);
    }
  };

  const run = async () => {
    let trace;
    try {
      trace = JSON.parse(traceText);
    } catch (parseError) {
      setResult(null);
      setProblems([`Trace JSON: ${describeParseError(traceText, parseError)}`]);
      return;
    }
    setBusy(true);
    setProblems([]);
    setResult(null);
    // The server ends a try within its time limit; should its answer still not come (a proxy
    // holding the request), the panel stops waiting a little after and says why.
    const controller = new AbortController();
    const limit = config.tryTimeLimitS || 0;
    const timer = limit ? window.setTimeout(() => controller.abort(), (limit + 10) * 1000) : 0;
    try {
      const { status, body } = await requestJson(config.tryUrl, { method: "POST", body: { guardrail: doc, trace, mode }, signal: controller.signal });
      if (status >= 400) {
        const errors = (body && body.errors) || [];
        onGuardrailErrors(errors.filter((error) => !String(error.path || "").startsWith("/trace")));
        setProblems(errors.map((error) => `${error.path || "/"}: ${error.message}`));
      } else {
        setResult((body && (body.result || (Array.isArray(body.results) && body.results[0]))) || body || {});
      }
    } catch (failure) {
      setProblems([
        failure.name === "AbortError"
          ? `No answer within ${limit + 10} s: the judge or the console could not be reached. Nothing was saved.`
          : failure.message,
      ]);
    } finally {
      window.clearTimeout(timer);
      setBusy(false);
    }
  };

  return (
    <section className="card kg-try" aria-labelledby="kg-try-title">
      <header className="card__header">
        <h2 id="kg-try-title" className="card__title">Try it</h2>
        <p className="card__subtitle">Run this guardrail, as it is now, against a trace. Nothing is saved.</p>
      </header>
      <div className="card__body">
        {config.tracesUrl ? (
          <div className="form-group">
            <label className="control-label" htmlFor="kg-try-search">Find a trace of this tenant</label>
            <input
              id="kg-try-search"
              type="search"
              className="form-control"
              placeholder="id, agent or flow"
              value={search}
              onChange={(event) => setSearch(event.target.value)}
            />
            <label className="control-label" htmlFor="kg-try-recent">Trace</label>
            <select id="kg-try-recent" className="form-control" value={picked} onChange={pickTrace}>
              <option value="">{traces.length ? "Choose a trace…" : search ? "No trace matches" : "No recent traces"}</option>
              <TraceOptions traces={traces} />
            </select>
            {tracesError ? <p className="kg-parse-error">{tracesError}</p> : null}
          </div>
        ) : null}
        <div className="form-group">
          <label className="control-label" htmlFor="kg-try-trace">Trace JSON</label>
          <textarea
            id="kg-try-trace"
            className="form-control kg-code"
            rows={10}
            spellCheck={false}
            placeholder='{"id": "run-1", "output": "…", "toolCalls": []}'
            value={traceText}
            onChange={(event) => setTraceText(event.target.value)}
          />
        </div>
        <div className="form-group">
          <label className="control-label" htmlFor="kg-try-mode">Mode</label>
          <select id="kg-try-mode" className="form-control" value={mode} onChange={(event) => setMode(event.target.value)}>
            <option value="ci">ci: as the CI command and evaluation runs evaluate</option>
            <option value="runtime">runtime: as a runtime's verdict evaluates</option>
          </select>
        </div>
        <div className="kg-try-actions">
          <button type="button" className="btn btn--secondary" onClick={run} disabled={busy || !traceText.trim()}>
            {busy ? "Running…" : "Run against this trace"}
          </button>
        </div>
        {problems.length ? (
          <ul className="kg-problems" role="alert">
            {problems.map((problem, index) => <li key={index}>{problem}</li>)}
          </ul>
        ) : null}
        {result ? <ResultView result={result} /> : null}
      </div>
    </section>
  );
}
