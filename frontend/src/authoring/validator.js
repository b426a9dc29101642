/**
 * The form's live validator, JSON Schema draft 2020-12 with format checking (the dialect the
 * server validates with), safe under the console's Content-Security-Policy.
 *
 * Ajv compiles every schema into JavaScript with `new Function`, which `script-src 'self'`
 * (no 'unsafe-eval') forbids, and the config schemas come from the check registry at run
 * time, so they cannot be compiled ahead of time. This validator therefore keeps rjsf's
 * AJV8Validator for everything rjsf does with validation results (error lists, the error
 * schema, custom validation, transformErrors) and replaces only the schema evaluation with
 * @cfworker/json-schema, an interpreting 2020-12 validator, whose errors it hands on in
 * Ajv's shape.
 */
import { Validator } from "@cfworker/json-schema";
import { customizeValidator } from "@rjsf/validator-ajv8";

const AJV8Validator = customizeValidator().constructor;

/** Keywords that only say "something below failed": the failing keyword below is reported instead. */
const WRAPPER_KEYWORDS = new Set(["properties", "patternProperties", "items", "prefixItems", "$ref", "$dynamicRef", "allOf", "false", "dependentSchemas", "contains", "then", "else"]);

const quoted = (text) => {
  const match = /"((?:[^"\\]|\\.)*)"/.exec(text);
  return match ? JSON.parse(`"${match[1]}"`) : "";
};

function decodeLocation(location) {
  return location.replace(/^#/, "");
}

/** One cfworker output unit in the shape of an Ajv error, which rjsf knows how to place. */
function toAjvError(unit) {
  const instancePath = decodeLocation(unit.instanceLocation);
  const schemaPath = unit.keywordLocation;
  const base = { instancePath, schemaPath, keyword: unit.keyword, params: {}, message: unit.error.replace(/\.$/, "") };
  switch (unit.keyword) {
    case "required": {
      const missingProperty = quoted(unit.error);
      return { ...base, params: { missingProperty }, message: `must have required property '${missingProperty}'` };
    }
    case "additionalProperties":
    case "unevaluatedProperties": {
      const additionalProperty = quoted(unit.error);
      return { ...base, params: { additionalProperty }, message: `must NOT have the property '${additionalProperty}'` };
    }
    case "oneOf":
      return { ...base, message: "must match exactly one of the choices" };
    case "anyOf":
      return { ...base, message: "must match one of the choices" };
    case "enum":
      return { ...base, message: "must be one of the allowed values" };
    case "const":
      return { ...base, message: "must be the fixed value" };
    default:
      return base;
  }
}

export function cfworkerErrorsToAjv(units) {
  return units.filter((unit) => !WRAPPER_KEYWORDS.has(unit.keyword)).map(toAjvError);
}

/** A schema rjsf validates on its own (a oneOf option, say) still needs the root's definitions. */
function withRootDefinitions(schema, rootSchema) {
  if (!rootSchema || schema === rootSchema || typeof schema !== "object") return schema;
  return {
    ...schema,
    $defs: { ...(rootSchema.$defs || {}), ...(schema.$defs || {}) },
    definitions: { ...(rootSchema.definitions || {}), ...(schema.definitions || {}) },
  };
}

export class CspSafeValidator extends AJV8Validator {
  constructor() {
    super({});
    this.compiled = new WeakMap();
  }

  validatorFor(schema, rootSchema) {
    const roots = this.compiled.get(schema) || new Map();
    this.compiled.set(schema, roots);
    if (!roots.has(rootSchema)) {
      const { $id, $schema, ...body } = withRootDefinitions(schema, rootSchema);
      roots.set(rootSchema, new Validator(body, "2020-12", false));
    }
    return roots.get(rootSchema);
  }

  rawValidation(schema, formData) {
    try {
      const result = this.validatorFor(schema, schema).validate(formData === undefined ? null : formData);
      return { errors: result.valid ? undefined : cfworkerErrorsToAjv(result.errors), validationError: undefined };
    } catch (error) {
      return { errors: undefined, validationError: error };
    }
  }

  isValid(schema, formData, rootSchema) {
    try {
      return this.validatorFor(schema, rootSchema).validate(formData === undefined ? null : formData).valid;
    } catch {
      return false;
    }
  }

  handleSchemaUpdate() {}

  reset() {
    this.compiled = new WeakMap();
  }
}

export const validator = new CspSafeValidator();
