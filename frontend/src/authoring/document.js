/**
 * The guardrail document as the author wrote it: helpers that keep what the form hands back
 * free of values nobody typed, place server errors on fields, and explain JSON parse errors.
 */
import { resolveRef, unescapePointerToken } from "./schema.js";

const isPlainObject = (value) => value !== null && typeof value === "object" && !Array.isArray(value);

export function deepEqual(a, b) {
  if (a === b) return true;
  if (typeof a !== typeof b || a === null || b === null || typeof a !== "object") return false;
  if (Array.isArray(a) !== Array.isArray(b)) return false;
  const keysA = Object.keys(a);
  const keysB = Object.keys(b);
  return keysA.length === keysB.length && keysA.every((key) => deepEqual(a[key], b[key]));
}

const isEmpty = (value) =>
  value === "" || (Array.isArray(value) && value.length === 0) || (isPlainObject(value) && Object.keys(value).length === 0);

/**
 * Drops `undefined` members, and the empty strings, arrays and objects that the form created,
 * from `next` (an object left empty once its own empty members are gone goes too): the form
 * fills in `{}` for sections nobody opened (`action.retry`, `limits`, `needsSpec`…) whenever
 * the kind or the check changes, and an empty `limits` or `retry` is not even valid.
 * An empty value that `previous` already held at the same place (the author wrote it, in the
 * JSON view or an imported file) stays, so that a document round-trips. A section the author
 * opens ("+ Add") stays open through the editor's own record of it (`withOpenSections`), not
 * through an empty object in the document.
 */
export function pruneFormData(next, previous) {
  if (Array.isArray(next)) {
    return next.map((item, index) => pruneFormData(item, Array.isArray(previous) ? previous[index] : undefined));
  }
  if (!isPlainObject(next)) return next;
  const out = {};
  for (const [key, value] of Object.entries(next)) {
    if (value === undefined) continue;
    const before = isPlainObject(previous) ? previous[key] : undefined;
    const cleaned = pruneFormData(value, before);
    if (isEmpty(cleaned) && !deepEqual(cleaned, before)) continue;
    out[key] = cleaned;
  }
  return out;
}

/** `/action/on-violation` -> ["action", "on-violation"]. */
export function pointerTokens(pointer) {
  if (!pointer || pointer === "/") return [];
  return String(pointer).replace(/^#/, "").split("/").slice(1).map(unescapePointerToken);
}

/**
 * Server errors `[{path, message}]` as an rjsf ErrorSchema: each message lands in the
 * `__errors` of the field its JSON pointer names (the root for an empty pointer).
 * `prefix` strips a leading segment, e.g. "guardrail" for the try endpoint's errors.
 */
export function errorsToErrorSchema(errors, prefix) {
  const schema = {};
  for (const error of errors || []) {
    let tokens = pointerTokens(error.path || "");
    if (prefix && tokens[0] === prefix) tokens = tokens.slice(1);
    let node = schema;
    for (const token of tokens) {
      node[token] = node[token] || {};
      node = node[token];
    }
    node.__errors = [...(node.__errors || []), String(error.message || "invalid")];
  }
  return schema;
}

/** A JSON parse error as "line L, column C: message", computed from the position V8 reports. */
export function describeParseError(text, error) {
  const message = String(error.message || error);
  const match = message.match(/position (\d+)/);
  if (!match) return message;
  const position = Number(match[1]);
  const before = text.slice(0, position);
  const line = before.split("\n").length;
  const column = position - before.lastIndexOf("\n");
  const reason = message.replace(/\s*(in JSON )?at position \d+.*$/, "").replace(/^JSON\.parse: /, "");
  return `Line ${line}, column ${column}: ${reason}`;
}

/** Parses the raw JSON view's text: `{doc}` for a JSON object, `{error}` otherwise. */
export function parseDocument(text) {
  let value;
  try {
    value = JSON.parse(text);
  } catch (error) {
    return { error: describeParseError(text, error) };
  }
  if (!isPlainObject(value)) return { error: "A guardrail is a JSON object: { ... }." };
  return { doc: value };
}

export const formatJson = (value) => JSON.stringify(value, null, 2);

/**
 * The document as the form should draw it: the form takes a missing or empty object for a
 * closed section, so each section the author opened (`opened`: the DOM ids, `root_budget`,
 * of the sections whose "+ Add" they pressed) is handed to it with its first field present
 * but unset, which keeps it open while nothing is filled in; so is an empty object the
 * document itself holds (written in the JSON view).
 */
export function withOpenSections(value, schema, root, opened = new Set(), id = "root", depth = 0) {
  if (!isPlainObject(value) || depth > 8 || !schema) return value;
  const node = resolveRef(root, schema);
  const variant = node && [...(node.oneOf || []), ...(node.anyOf || [])].map((item) => resolveRef(root, item)).find((item) => item && item.properties);
  const props = node && (node.properties || (variant && variant.properties));
  if (!props) return value;
  const keys = Object.keys(value);
  const out = {};
  if (!keys.length && depth > 0) {
    const first = Object.keys(props)[0];
    if (!first) return value;
    out[first] = undefined;
  }
  for (const key of keys) out[key] = props[key] ? withOpenSections(value[key], props[key], root, opened, `${id}_${key}`, depth + 1) : value[key];
  for (const [key, prop] of Object.entries(props)) {
    if (out[key] !== undefined || !opened.has(`${id}_${key}`)) continue;
    const resolved = resolveRef(root, prop);
    if (resolved && (resolved.type === "object" || resolved.properties)) out[key] = withOpenSections({}, prop, root, opened, `${id}_${key}`, depth + 1);
  }
  return out;
}
