/**
 * Which problems the editor shows, and where: the browser's own validation and the server's
 * answer are merged so that each problem shows once (the server's words win at a field), and
 * a problem shows only at a field the author has touched, or everywhere once they try to save.
 */
import { pointerTokens } from "./document.js";

export const fieldDomId = (path) => ["root", ...pointerTokens(path)].join("_");

const escapeToken = (token) => String(token).replace(/~/g, "~0").replace(/\//g, "~1");

const friendly = (message) => (/^must have required property/.test(String(message)) ? "Required." : String(message));

/** An rjsf ErrorSchema as a list of `{path, message}` (JSON pointers). */
export function errorSchemaToList(schema, tokens = []) {
  const out = [];
  if (!schema || typeof schema !== "object") return out;
  for (const [key, value] of Object.entries(schema)) {
    if (key === "__errors") {
      const path = tokens.length ? `/${tokens.map(escapeToken).join("/")}` : "";
      (value || []).forEach((message) => out.push({ path, message: friendly(message) }));
    } else {
      out.push(...errorSchemaToList(value, [...tokens, key]));
    }
  }
  return out;
}

/** The server's errors, and the browser's at the fields the server has nothing to say about. */
export function mergeErrors(client, server) {
  const serverPaths = new Set(server.map((error) => error.path || ""));
  const seen = new Set();
  return [...server, ...client.filter((error) => !serverPaths.has(error.path || ""))].filter((error) => {
    const key = `${error.path || ""}\u0000${error.message}`;
    if (seen.has(key)) return false;
    seen.add(key);
    return true;
  });
}

/** A problem is shown once its field (or one inside it) was touched, or after a save. */
export function isVisible(path, touched, submitted) {
  if (submitted) return true;
  const id = fieldDomId(path || "");
  if (id === "root") return false;
  for (const touchedId of touched) if (touchedId === id || touchedId.startsWith(`${id}_`)) return true;
  return false;
}

/** The browser's validation of `doc` against the composed schema, as `{path, message}`. */
export function clientErrors(validator, schema, doc) {
  try {
    const { errorSchema } = validator.validateFormData(doc, schema);
    return errorSchemaToList(errorSchema);
  } catch {
    return [];
  }
}

export function visibleErrors(errors, touched, submitted) {
  return errors.filter((error) => isVisible(error.path, touched, submitted));
}
