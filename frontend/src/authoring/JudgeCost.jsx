/**
 * The judge cost estimate of what an llm-judge draft is about to run, as New evaluation shows
 * it: Try it on the newest trace, and Preview impact over its default selection (calls, cache
 * hits, dollars at most). Asked again, after a pause, when the draft changes.
 */
import { useEffect, useState } from "react";
import { requestJson } from "../shared/http.js";

const DELAY_MS = 700;

function useEstimate(config, doc) {
  const [estimate, setEstimate] = useState(null);
  const judged = doc && doc.kind === "llm-judge";
  const text = judged ? JSON.stringify(doc) : "";
  useEffect(() => {
    if (!config.estimateUrl || !text) {
      setEstimate(null);
      return undefined;
    }
    const controller = new AbortController();
    const timer = window.setTimeout(() => {
      const body = { guardrail: JSON.parse(text), ...(config.tenant ? { tenant: config.tenant } : {}) };
      requestJson(config.estimateUrl, { method: "POST", body, signal: controller.signal })
        .then(({ status, body: answer }) => setEstimate(status === 200 ? answer : null))
        .catch(() => setEstimate(null));
    }, DELAY_MS);
    return () => {
      window.clearTimeout(timer);
      controller.abort();
    };
  }, [config.estimateUrl, config.tenant, text]);
  return estimate;
}

function calls(part) {
  const cached = part.cached ? `, ${part.cached} from the cache` : "";
  return `${part.calls} judge ${part.calls === 1 ? "call" : "calls"}${cached}, at most $${part.costUsd}`;
}

export function JudgeCost({ config, doc }) {
  const estimate = useEstimate(config, doc);
  if (!estimate) return null;
  const { preview, try: tried } = estimate;
  const errors = Object.entries({ ...(tried.errors || {}), ...(preview.errors || {}) });
  return (
    <div className="kg-judge-cost" aria-live="polite" data-judge-cost>
      <strong>Judge cost estimate</strong>
      <ul>
        <li data-judge-cost-try>Try it on the newest trace: {tried.traces ? calls(tried) : "no trace to try yet"}</li>
        <li data-judge-cost-preview>
          Preview impact over {preview.traces} {preview.traces === 1 ? "trace" : "traces"}
          {preview.extrapolated ? ` (extrapolated from ${preview.sampled})` : ""}: {calls(preview)}
        </li>
      </ul>
      {errors.map(([guardrail, reason]) => (
        <p key={guardrail} className="kg-parse-error">{guardrail}: {reason}</p>
      ))}
    </div>
  );
}
