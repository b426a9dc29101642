/**
 * One call to the console within a deadline: retried on 429, 502, 503 and 504 (after
 * Retry-After when the console sends it) and on a connection that fails, each attempt with
 * the same Idempotency-Key, and abandoned when the deadline comes (AbortController).
 */
import type { ApiErrors } from "./types.js";

/** The console did not answer in time, or could not (a 5xx, an unreachable address). */
export class ConsoleUnavailable extends Error {
  override name = "ConsoleUnavailable";
}

/** The console refused the request (a 4xx other than 429): a bad trace, key or scope. */
export class KindgiApiError extends Error {
  override name = "KindgiApiError";
  constructor(
    readonly status: number,
    readonly errors: ApiErrors,
  ) {
    super(`the console answered ${status}: ${errors.map((e) => `${e.path || "/"} ${e.message}`).join("; ")}`);
  }
}

export interface Connection {
  baseUrl: string;
  apiKey: string;
  timeoutMs: number;
  fetch: typeof fetch;
}

export interface Answer {
  status: number;
  body: unknown;
}

const RETRIED = new Set([429, 502, 503, 504]);
const FIRST_BACKOFF_MS = 50;
const MAX_BACKOFF_MS = 1000;

/** POST `body` to `path`; the console's answer, or ConsoleUnavailable by the deadline. */
export async function post(connection: Connection, path: string, body: unknown): Promise<Answer> {
  const controller = new AbortController();
  const timer = setTimeout(() => controller.abort(), connection.timeoutMs);
  const deadline = Date.now() + connection.timeoutMs;
  const request = requestInit(connection, JSON.stringify(body), controller.signal);
  let why = "no answer yet";
  try {
    for (let attempt = 1; ; attempt++) {
      const tried = await tryOnce(connection, path, request, controller.signal);
      if ("answer" in tried) return tried.answer;
      why = tried.why;
      const wait = tried.retryAfterMs ?? backoff(attempt);
      if (Date.now() + wait >= deadline) {
        throw new ConsoleUnavailable(`${why}; a retry in ${wait} ms would pass the ${connection.timeoutMs} ms deadline`);
      }
      await sleep(wait, controller.signal);
    }
  } catch (error) {
    if (error instanceof ConsoleUnavailable || error instanceof KindgiApiError) throw error;
    throw new ConsoleUnavailable(`no answer within ${connection.timeoutMs} ms (${why})`);
  } finally {
    clearTimeout(timer);
  }
}

type Attempt = { answer: Answer } | { why: string; retryAfterMs?: number | undefined };

async function tryOnce(connection: Connection, path: string, request: RequestInit, signal: AbortSignal): Promise<Attempt> {
  let response: Response;
  try {
    response = await connection.fetch(new URL(path, connection.baseUrl), request);
  } catch (error) {
    if (signal.aborted) throw error;
    return { why: `cannot reach ${connection.baseUrl}: ${describe(error)}` };
  }
  if (RETRIED.has(response.status)) {
    await response.body?.cancel();
    return { why: `the console answered ${response.status}`, retryAfterMs: retryAfterMs(response.headers) };
  }
  const body = await readJson(response);
  if (response.status >= 500) throw new ConsoleUnavailable(`the console answered ${response.status}`);
  if (response.status >= 400) throw new KindgiApiError(response.status, errorsOf(body));
  return { answer: { status: response.status, body } };
}

function requestInit(connection: Connection, body: string, signal: AbortSignal): RequestInit {
  return {
    method: "POST",
    body,
    signal,
    headers: {
      Authorization: `Bearer ${connection.apiKey}`,
      "Content-Type": "application/json",
      Accept: "application/json",
      // The console replays the first answer to a retry with the same key on the endpoints
      // that start work; evaluate and ingest are idempotent by the trace's id besides.
      "Idempotency-Key": crypto.randomUUID(),
    },
  };
}

async function readJson(response: Response): Promise<unknown> {
  const text = await response.text();
  try {
    return text ? JSON.parse(text) : null;
  } catch {
    throw new ConsoleUnavailable(`the console answered ${response.status} with a body that is not JSON`);
  }
}

function errorsOf(body: unknown): ApiErrors {
  const errors = (body as { errors?: unknown } | null)?.errors;
  return Array.isArray(errors) ? (errors as ApiErrors) : [{ path: "", message: "no error detail" }];
}

/** Retry-After in milliseconds: delay-seconds or an HTTP date (RFC 9110 section 10.2.3). */
export function retryAfterMs(headers: Headers): number | undefined {
  const value = headers.get("Retry-After")?.trim();
  if (!value) return undefined;
  if (/^\d+$/.test(value)) return Number(value) * 1000;
  const at = Date.parse(value);
  return Number.isNaN(at) ? undefined : Math.max(0, at - Date.now());
}

function backoff(attempt: number): number {
  const ceiling = Math.min(MAX_BACKOFF_MS, FIRST_BACKOFF_MS * 2 ** (attempt - 1));
  return Math.round(ceiling / 2 + (Math.random() * ceiling) / 2);
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(resolve, ms);
    signal.addEventListener("abort", () => (clearTimeout(timer), reject(signal.reason)), { once: true });
  });
}

function describe(error: unknown): string {
  const cause = (error as { cause?: { code?: string; message?: string } }).cause;
  return cause?.code ?? cause?.message ?? (error instanceof Error ? error.message : String(error));
}
