/**
 * Builds the form's schema and uiSchema from the published guardrail schema and the check
 * registry: `check` becomes a choice of the registered checks of the chosen kind, and
 * `config` the chosen check's own config schema, so that both the form and the live
 * validation follow the check the author picked.
 */

const CONFIG_DEFS_PREFIX = "kindgiConfig__";

const clone = (value) => (value === undefined ? undefined : JSON.parse(JSON.stringify(value)));

/** Resolves a local `#/...` reference against the root schema (one level is enough for ours). */
export function resolveRef(root, schema) {
  let current = schema;
  for (let hops = 0; current && typeof current.$ref === "string" && hops < 10; hops += 1) {
    if (!current.$ref.startsWith("#")) return current;
    const tokens = current.$ref.slice(1).split("/").filter(Boolean).map(unescapePointerToken);
    let target = root;
    for (const token of tokens) target = target == null ? undefined : target[token];
    if (!target) return current;
    const { $ref, ...siblings } = current;
    current = { ...target, ...siblings };
  }
  return current;
}

export function unescapePointerToken(token) {
  return decodeURIComponent(token).replace(/~1/g, "/").replace(/~0/g, "~");
}

/** Rewrites `#/$defs/x` (and `#/definitions/x`) references of a config schema to the hoisted names. */
function rewriteRefs(node, renamed) {
  if (Array.isArray(node)) return node.map((item) => rewriteRefs(item, renamed));
  if (!node || typeof node !== "object") return node;
  const out = {};
  for (const [key, value] of Object.entries(node)) {
    if (key === "$ref" && typeof value === "string") {
      const match = value.match(/^#\/(\$defs|definitions)\/(.+)$/);
      out.$ref = match && renamed.has(match[2]) ? `#/$defs/${CONFIG_DEFS_PREFIX}${match[2]}` : value;
    } else {
      out[key] = rewriteRefs(value, renamed);
    }
  }
  return out;
}

/**
 * Embeds a check's config schema under the guardrail schema: its definitions move to the
 * root's `$defs` (renamed so that they cannot clash) and `$schema`/`$id` go, since a
 * sub-schema may not carry them.
 */
function embedConfigSchema(root, configSchema, base) {
  const { $schema, $id, $defs = {}, definitions = {}, ...body } = clone(configSchema);
  const defs = { ...definitions, ...$defs };
  const renamed = new Set(Object.keys(defs));
  root.$defs = root.$defs || {};
  for (const [name, def] of Object.entries(defs)) root.$defs[CONFIG_DEFS_PREFIX + name] = rewriteRefs(def, renamed);
  return { title: base.title || "Config", description: base.description, ...rewriteRefs(body, renamed) };
}

export function checksOfKind(checks, kind) {
  return kind ? checks.filter((check) => check.kind === kind) : checks;
}

function checkChoices(checks, kind, baseCheck) {
  const candidates = checksOfKind(checks, kind);
  if (!candidates.length) return baseCheck;
  return {
    ...baseCheck,
    type: "string",
    oneOf: candidates.map((check) => ({
      const: check.id,
      title: check.builtin ? `${check.id} (built-in)` : check.pack ? `${check.id} (${check.pack})` : check.id,
    })),
  };
}

/** Kind is a choice of the kinds that have a registered check (and the document's own, if another). */
function kindChoices(checks, baseKind, currentKind) {
  const kinds = new Set(checks.map((check) => check.kind).filter(Boolean));
  if (!kinds.size) (baseKind.examples || []).forEach((kind) => kinds.add(kind));
  if (currentKind) kinds.add(currentKind);
  const { examples: _examples, ...rest } = baseKind;
  return { ...rest, enum: [...kinds] };
}

/** judgeCapabilities as the fields routing reads (the server checks the same shape). */
const JUDGE_CAPABILITIES = {
  type: "object",
  additionalProperties: false,
  properties: {
    model: { type: "string", minLength: 1, title: "Judge model" },
    required: { type: "array", uniqueItems: true, items: { type: "string", minLength: 1 }, title: "Required capabilities" },
    prefer: { type: "array", uniqueItems: true, items: { type: "string", minLength: 1 }, title: "Preferred capabilities" },
  },
};

/** One line of help per field, written for the person filling the form (keyed by path). */
export const HELP = {
  id: "A short unique name used in URLs, CI reports and the API.",
  name: "What people see in lists and reports.",
  description: "What it guarantees, and what happens when it is broken.",
  kind: "How it is checked: zero-llm runs code; llm-judge asks a model and costs money.",
  check: "The check that does the work; its settings appear below.",
  config: "Settings of the chosen check.",
  configSchema: "JSON Schema of a pack check's settings (pack checks only).",
  action: "What a failure does to the agent's turn.",
  "action/on-violation": "halt fails the turn and withholds its answer; anything else only records a violation.",
  "action/retry": "Attempts asked for when on-violation is retry (recorded only).",
  "action/retry/maxAttempts": "How many attempts the retry asks for.",
  "action/escalateTo": "The review queue that escalate puts its violations in (escalations when empty).",
  "action/compensateWith": "Compensating tool for compensate (recorded only).",
  severity: "How serious a failure is; the review queue sorts by it.",
  scope: "Where it applies; without a scope it applies to every run.",
  "scope/when": "Every run, only in CI, or only at runtime.",
  "scope/agents": "Only these agents (none listed: all agents).",
  "scope/flows": "Only these flows (none listed: all flows).",
  "scope/tenants": "Only these tenants (none listed: all tenants).",
  budget: "Cost and latency one judge call should stay within (declared, not enforced).",
  "budget/maxCostUsd": "Most one judge call should cost, in US dollars.",
  "budget/maxLatencyMs": "Longest one judge call should take, in milliseconds.",
  judgeCapabilities: "Which judge model may score this guardrail.",
  "judgeCapabilities/model": "Pin one registered judge model by its id (optional).",
  "judgeCapabilities/required": "Capabilities the judge must have, such as long-context.",
  "judgeCapabilities/prefer": "Capabilities that break a tie between equally cheap judges.",
  sandbox: "Isolation around a pack check's code.",
  limits: "Memory and CPU caps while the check runs in the sandbox.",
  network: "Hosts the check may reach from the sandbox.",
  needsSpec: "Environment, secrets, config, capabilities and bindings the check needs.",
  codeArtifactRef: "Where a pack check's code lives (an OCI image or a file).",
  checkBuiltIn: "Set by the CLI for a built-in check shipped without code.",
};

/** The first sentence of a schema's prose: help stays one line. */
export function firstSentence(text) {
  const value = String(text || "").trim();
  const match = value.match(/^(.+?[.!?])(\s|$)/);
  return match ? match[1] : value;
}

/** Sets the help of every property: HELP where written, else the schema's first sentence. */
function oneLineHelp(root, node, path, depth) {
  if (!node || typeof node !== "object" || depth > 8) return;
  const target = node.$ref ? resolveRef(root, { $ref: node.$ref }) : node;
  for (const [name, prop] of Object.entries(target.properties || {})) {
    if (!prop || typeof prop !== "object") continue;
    const key = path ? `${path}/${name}` : name;
    if (HELP[key]) prop.description = HELP[key];
    // The config's own fields speak for the check that declares them.
    if (key === "config") continue;
    else if (prop.description) prop.description = firstSentence(prop.description);
    oneLineHelp(root, prop, key, depth + 1);
  }
  for (const variant of [...(target.oneOf || []), ...(target.anyOf || [])]) {
    if (variant && variant.description) variant.description = firstSentence(variant.description);
    oneLineHelp(root, variant, path, depth + 1);
  }
}

const ALWAYS_SHOWN = ["id", "name", "description", "kind", "check", "config", "action", "severity", "scope"];
const JUDGE_FIELDS = ["budget", "judgeCapabilities"];
const PACK_FIELDS = ["sandbox", "limits", "network", "needsSpec", "codeArtifactRef", "configSchema"];

/** The fields that the chosen kind and check do not use: the form puts them under "Advanced". */
export function advancedFields(schema, kind, check) {
  const shown = new Set(ALWAYS_SHOWN);
  if (kind === "llm-judge") JUDGE_FIELDS.forEach((name) => shown.add(name));
  if (check && check.pack && !check.builtin) PACK_FIELDS.forEach((name) => shown.add(name));
  return Object.keys(schema.properties || {}).filter((name) => !shown.has(name));
}

/**
 * A property `{const: X}` without a type gets the type of X, so that the form can render it;
 * a `true`-only marker (checkBuiltIn) becomes `enum: [true]`, which the form does not fill in
 * by itself the way it fills in constants.
 */
function typeConstants(node) {
  if (Array.isArray(node)) return node.forEach(typeConstants);
  if (!node || typeof node !== "object") return;
  if (node.const === true && (node.type === undefined || node.type === "boolean")) {
    delete node.const;
    node.type = "boolean";
    node.enum = [true];
  } else if ("const" in node && node.type === undefined && node.const !== null) {
    node.type = Array.isArray(node.const) ? "array" : typeof node.const === "number" ? "number" : typeof node.const;
  }
  // A variant's discriminator (network.kind = "allowlist") is filled in when the variant is chosen.
  if ("const" in node && node.const !== null && typeof node.const !== "object" && node.default === undefined) {
    node.default = node.const;
  }
  Object.values(node).forEach(typeConstants);
}

const ABBREVIATIONS = { usd: "USD", ms: "ms", mb: "MB", id: "ID", cpu: "CPU", json: "JSON", url: "URL", llm: "LLM", ci: "CI", oci: "OCI" };

/** "on-violation" -> "On violation", "maxCostUsd" -> "Max cost USD". */
export function humanize(name) {
  const words = String(name)
    .replace(/([a-z0-9])([A-Z])/g, "$1 $2")
    .replace(/[-_]+/g, " ")
    .trim()
    .toLowerCase()
    .split(/\s+/)
    .map((word) => ABBREVIATIONS[word] || word)
    .join(" ");
  return words.charAt(0).toUpperCase() + words.slice(1);
}

/** Gives every property without a title a readable one (the wire names stay as they are). */
function titleProperties(node) {
  if (Array.isArray(node)) return node.forEach(titleProperties);
  if (!node || typeof node !== "object") return;
  if (node.properties && typeof node.properties === "object") {
    for (const [name, prop] of Object.entries(node.properties)) {
      if (prop && typeof prop === "object" && !prop.title && !prop.$ref) prop.title = humanize(name);
    }
  }
  Object.values(node).forEach(titleProperties);
}

/** The form schema for a document of the given kind and check. */
export function composeSchema(guardrailSchema, checks, kind, checkId) {
  const root = clone(guardrailSchema);
  // A fixed $id would make the validator reuse a compiled schema with another check's config.
  delete root.$id;
  // The page says what a guardrail is; the schema's own long description would open the form.
  delete root.description;
  delete root.title;
  const props = root.properties || {};
  if (props.kind) props.kind = kindChoices(checks, props.kind, kind);
  if (props.judgeCapabilities) props.judgeCapabilities = { ...JUDGE_CAPABILITIES, title: props.judgeCapabilities.title };
  if (props.check) props.check = checkChoices(checks, kind, props.check);
  const check = checks.find((candidate) => candidate.id === checkId);
  if (props.config && check && check.configSchema && typeof check.configSchema === "object") {
    props.config = embedConfigSchema(root, check.configSchema, props.config);
  }
  for (const [name, prop] of Object.entries(props)) {
    // A $ref'd property (action, scope) takes its title here, next to the reference.
    if (prop && prop.$ref && !prop.title) props[name] = { ...prop, title: humanize(name) };
  }
  typeConstants(root);
  titleProperties(root);
  oneLineHelp(root, root, "", 0);
  return root;
}

/** The registered check named by the document, if any. */
export function findCheck(checks, checkId) {
  return checks.find((check) => check.id === checkId);
}

const isFreeMap = (schema) =>
  schema &&
  (schema.type === "object" || schema.type === undefined) &&
  !schema.properties &&
  !schema.oneOf &&
  !schema.anyOf &&
  !schema.allOf &&
  !schema.enum &&
  !("const" in schema) &&
  (schema.type === "object" || Object.keys(schema).every((key) => ["title", "description", "$comment"].includes(key)));

/** uiSchema entries for one object schema's properties, recursing into nested objects. */
function uiForObject(root, schema, depth) {
  const ui = {};
  if (depth > 6 || !schema || !schema.properties) return ui;
  for (const [name, raw] of Object.entries(schema.properties)) {
    const prop = resolveRef(root, raw);
    if (isFreeMap(prop)) {
      ui[name] = { "ui:field": "json" };
    } else if (prop.type === "boolean" && (prop.const === true || (Array.isArray(prop.enum) && prop.enum.length === 1 && prop.enum[0] === true))) {
      ui[name] = { "ui:widget": "flag" };
    } else if (prop.type === "object" && prop.properties) {
      const nested = uiForObject(root, prop, depth + 1);
      if (Object.keys(nested).length) ui[name] = nested;
    } else if (prop.type === "string" && name === "on-violation" && Array.isArray(prop.examples) && prop.examples.length) {
      ui[name] = { "ui:widget": "choiceOrOther" };
    } else if (prop.type === "string" && /description|rubric|prompt/i.test(name)) {
      ui[name] = { "ui:widget": "textarea", "ui:options": { rows: 3 } };
    }
  }
  return ui;
}

const FIELD_ORDER = ["id", "name", "description", "kind", "check", "config", "action", "severity", "scope", "*"];

/** The uiSchema for a composed schema: free-form maps as JSON fields, a readable field order. */
export function composeUiSchema(schema, advanced = []) {
  const ui = uiForObject(schema, schema, 0);
  const present = new Set(Object.keys(schema.properties || {}));
  return {
    ...ui,
    config: { ...(ui.config || {}), "ui:enableOptionalDataFieldForType": [] },
    "ui:order": FIELD_ORDER.filter((name) => name === "*" || present.has(name)),
    "ui:options": { advanced },
    "ui:submitButtonOptions": { norender: true },
    "ui:globalOptions": { enableOptionalDataFieldForType: ["object"] },
  };
}
