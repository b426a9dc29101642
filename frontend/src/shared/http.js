/**
 * Same-origin JSON requests for the console's pages: the session cookie rides along and
 * unsafe methods carry Django's CSRF token, read from the `csrftoken` cookie.
 */

export function csrfToken() {
  const match = document.cookie.match(/(?:^|;\s*)csrftoken=([^;]+)/);
  return match ? decodeURIComponent(match[1]) : "";
}

/** A failed request: `status` is the HTTP status (0 when the network failed), `body` the parsed JSON, if any. */
export class HttpError extends Error {
  constructor(message, status, body) {
    super(message);
    this.status = status;
    this.body = body;
  }
}

async function readBody(response) {
  const text = await response.text();
  if (!text) return null;
  try {
    return JSON.parse(text);
  } catch {
    return { detail: text.slice(0, 300) };
  }
}

/**
 * Sends a JSON request and resolves with `{status, body}` for 2xx, 400, 409 and 412 answers (a
 * 400 carries field errors the caller shows, a 412 the current revision); rejects with an
 * HttpError otherwise. `headers` are added to the request's (If-Match).
 */
export async function requestJson(url, { method = "GET", body, signal, headers: extra } = {}) {
  const headers = { Accept: "application/json", ...(extra || {}) };
  if (body !== undefined) headers["Content-Type"] = "application/json";
  if (method !== "GET" && method !== "HEAD") headers["X-CSRFToken"] = csrfToken();
  let response;
  try {
    response = await fetch(url, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      credentials: "same-origin",
      signal,
    });
  } catch (error) {
    if (error.name === "AbortError") throw error;
    throw new HttpError(`Could not reach the console (${error.message}).`, 0, null);
  }
  const parsed = await readBody(response);
  // 400 (invalid), 409 (conflict) and 412 (saved meanwhile) carry {errors: [{path, message}]}.
  if (response.ok || [400, 409, 412].includes(response.status)) return { status: response.status, body: parsed };
  const firstError = parsed && Array.isArray(parsed.errors) && parsed.errors[0] && parsed.errors[0].message;
  const detail = parsed && (parsed.detail || parsed.message || firstError);
  throw new HttpError(detail ? `${response.status}: ${detail}` : `The console answered ${response.status}.`, response.status, parsed);
}

/** A list endpoint's items: a plain JSON array, or a paginated `{results: [...]}`. */
export function listItems(body) {
  if (Array.isArray(body)) return body;
  if (body && Array.isArray(body.results)) return body.results;
  return [];
}
