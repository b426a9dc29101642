/**
 * The client's types: the console's own, taken from its OpenAPI description (schema.d.ts,
 * generated), and the few the description leaves open (a guardrail's result).
 */
import type { components, operations } from "./schema.js";

/** One agent turn as the console stores it (runtrace.schema.json). */
export type RunTrace = components["schemas"]["RunTrace"];
/** One tool call of a turn. */
export type ToolCall = components["schemas"]["RunTraceToolCall"];
/** The stage of a turn a verdict is asked for. */
export type Stage = NonNullable<NonNullable<operations["v1_evaluate_create"]["parameters"]["query"]>["stage"]>;
/** `POST /api/v1/evaluate`'s answer, as the console describes it. */
export type EvaluateAnswer = operations["v1_evaluate_create"]["responses"][200]["content"]["application/json"];
/** `POST /api/v1/traces`'s answer to a batch. */
export type IngestBatchAnswer = operations["traces_ingest"]["responses"][207]["content"]["application/json"];
/** The API's one error shape. */
export type ApiErrors = operations["v1_evaluate_create"]["responses"][400]["content"]["application/json"]["errors"];

/**
 * One guardrail's result in a verdict (the engine's `Result.as_dict()`): the description
 * types `results` only as objects, so its fields are stated here.
 */
export interface GuardrailResult {
  guardrail: string;
  revision: number | null;
  status: "pass" | "fail" | "error" | "skipped";
  reason: string | null;
  action: string;
  severity: string;
  durationMs: number;
  details: Record<string, unknown>;
  /** Why a skipped guardrail did not apply (`stage`: not at this stage of the turn). */
  skipReason?: string | null;
}

/** What happens when the console cannot answer in time: let the turn go on, or halt it. */
export type FailMode = "open" | "closed";

/** The verdict on one stage of a turn. */
export interface Verdict {
  /** Whether the runtime must stop: not complete the turn, or not run the proposed tool call. */
  halted: boolean;
  /** `guardrail-violation` when a guardrail halts; `guardrail-error` when one that fails closed
   * errored; `console-unavailable` when the console could
   * not answer and failMode is closed; otherwise null. */
  reason: "guardrail-violation" | "guardrail-error" | "console-unavailable" | null;
  /** The first guardrail that halts the turn (at tool-call: that forbids the call). */
  haltedBy: string | null;
  stage: Stage;
  results: GuardrailResult[];
  /** Why the console gave no verdict (unreachable, too slow, overloaded: the verdict then
   * follows failMode), or, with reason `guardrail-error`, the guardrail that failed closed
   * and its error. null otherwise. */
  error: string | null;
  /** How the console stored the trace (absent when it gave no verdict). */
  trace?: EvaluateAnswer["trace"];
}

export interface KindgiOptions {
  /** The console's address, e.g. `https://console.example.com`. */
  baseUrl: string;
  /** An API key with the `evaluate` scope (and `ingest` for ingest()). */
  apiKey: string;
  /** The deadline of one call, retries included (default 2000 ms). */
  timeoutMs?: number;
  /** The verdict when the console cannot answer by the deadline (default `open`). */
  failMode?: FailMode;
  /** Traces ingest() holds at most; beyond, new ones are dropped and counted (default 1000). */
  maxQueue?: number;
  /** Traces per `POST /api/v1/traces` (default 100). */
  batchSize?: number;
  /** How long a trace waits in the queue before its batch is sent (default 1000 ms). */
  flushIntervalMs?: number;
  /** The fetch to use (default the global one). */
  fetch?: typeof fetch;
}

/** What ingest() has done so far. */
export interface IngestStats {
  /** Traces the console accepted (stored, or already stored). */
  sent: number;
  /** Traces the console refused (invalid, or another trace has the id). */
  rejected: number;
  /** Traces lost: the queue was full, or their batch could not be sent by its deadline. */
  dropped: number;
}
