/**
 * The form's own pieces: a JSON field for free-form maps (configSchema, judgeCapabilities,
 * a check without a config schema), a flag widget for `true`-only markers, and text buttons
 * in place of the icon-font buttons of rjsf's default theme (the console loads no icon font).
 */
import { getDefaultRegistry } from "@rjsf/core";
import { getUiOptions } from "@rjsf/utils";
import { useEffect, useState } from "react";
import { describeParseError, formatJson } from "./document.js";

const textOf = (value) => (value === undefined ? "" : formatJson(value));

/** Edits an object as JSON text; an empty box removes the member, a parse error is shown. */
export function JsonField(props) {
  const { formData, onChange, fieldPathId, schema, name, required, rawErrors = [], disabled, readonly } = props;
  const [text, setText] = useState(textOf(formData));
  const [error, setError] = useState("");
  useEffect(() => {
    // Follow changes from elsewhere (the JSON view) unless the box holds a pending edit.
    setText((current) => {
      try {
        if (current.trim() && JSON.stringify(JSON.parse(current)) === JSON.stringify(formData)) return current;
      } catch {
        return current;
      }
      return textOf(formData);
    });
  }, [formData]);
  const update = (event) => {
    const value = event.target.value;
    setText(value);
    if (!value.trim()) {
      setError("");
      onChange(undefined, fieldPathId.path);
      return;
    }
    try {
      const parsed = JSON.parse(value);
      setError("");
      onChange(parsed, fieldPathId.path);
    } catch (parseError) {
      setError(describeParseError(value, parseError));
    }
  };
  const label = schema.title || name;
  return (
    <div className="form-group field field-json">
      <label className="control-label" htmlFor={fieldPathId.$id}>
        {label}
        {required ? <span className="required">*</span> : null}
      </label>
      {schema.description ? <p className="field-description">{schema.description}</p> : null}
      <textarea
        id={fieldPathId.$id}
        className="form-control kg-code"
        rows={Math.min(14, Math.max(3, text.split("\n").length))}
        spellCheck={false}
        value={text}
        placeholder="{ }"
        disabled={disabled || readonly}
        onChange={update}
        aria-invalid={error || rawErrors.length ? "true" : undefined}
      />
      {error ? <p className="kg-parse-error" role="alert">{error}</p> : null}
      {rawErrors.length ? (
        <ul className="error-detail">
          {rawErrors.map((message, index) => (
            <li className="text-danger" key={index}>{message}</li>
          ))}
        </ul>
      ) : null}
    </div>
  );
}

/** A checkbox for a marker that is either `true` or absent (never `false`). */
export function FlagWidget({ id, value, onChange, label, disabled, readonly, schema }) {
  return (
    <div className="checkbox">
      <label htmlFor={id}>
        <input
          id={id}
          type="checkbox"
          checked={value === true}
          disabled={disabled || readonly}
          onChange={(event) => onChange(event.target.checked ? true : undefined)}
        />
        <span>{label || schema.title}</span>
      </label>
    </div>
  );
}

const OTHER = "__other__";

/**
 * A choice of the values a schema lists as `examples` (the five actions of on-violation),
 * with "Another action…" for an open string: a text box for a custom name.
 */
export function ChoiceOrOtherWidget({ id, value, onChange, onBlur, onFocus, schema, disabled, readonly, rawErrors = [] }) {
  const choices = Array.isArray(schema.examples) ? schema.examples : [];
  const known = value === undefined || value === "" || choices.includes(value);
  const [other, setOther] = useState(!known);
  useEffect(() => {
    if (!known) setOther(true);
  }, [known]);
  const selected = other ? OTHER : value === undefined ? "" : value;
  const choose = (event) => {
    const next = event.target.value;
    if (next === OTHER) {
      setOther(true);
      onChange(choices.includes(value) ? undefined : value);
    } else {
      setOther(false);
      onChange(next === "" ? undefined : next);
    }
  };
  return (
    <div className="kg-choice-other">
      <select
        id={id}
        className="form-control"
        value={selected}
        disabled={disabled || readonly}
        onChange={choose}
        onBlur={() => onBlur && onBlur(id, value)}
        onFocus={() => onFocus && onFocus(id, value)}
        aria-invalid={rawErrors.length ? "true" : undefined}
      >
        <option value="">Choose…</option>
        {choices.map((choice) => <option key={choice} value={choice}>{choice}</option>)}
        <option value={OTHER}>Another action…</option>
      </select>
      {other ? (
        <label className="kg-choice-other__custom" htmlFor={`${id}__custom`}>
          <span>Custom action</span>
          <input
            id={`${id}__custom`}
            className="form-control"
            type="text"
            value={value === undefined ? "" : value}
            disabled={disabled || readonly}
            onChange={(event) => onChange(event.target.value === "" ? undefined : event.target.value)}
            onBlur={() => onBlur && onBlur(id, value)}
          />
        </label>
      ) : null}
    </div>
  );
}

function TextButton({ label, kind = "secondary", className = "", onClick, disabled, id, title }) {
  return (
    <button
      type="button"
      id={id}
      className={`btn btn--${kind} btn--sm ${className}`}
      onClick={onClick}
      disabled={disabled}
      title={title || label}
      aria-label={title || label}
    >
      {label}
    </button>
  );
}

const sectionId = (controlId) => String(controlId || "").replace(/__optional(Add|Remove|Msg)$/, "");

/**
 * "+ Add" / "Remove" for an optional object, in place of rjsf's icon buttons. Both tell the
 * editor (`formContext.setSection`), which keeps an added section open while it is empty
 * without writing an empty object into the document, and closes it for good on Remove.
 */
export function OptionalDataControlsTemplate({ id, label, onAddClick, onRemoveClick, registry }) {
  const setSection = (registry && registry.formContext && registry.formContext.setSection) || (() => {});
  if (onAddClick) {
    const add = () => {
      setSection(sectionId(id), true);
      onAddClick();
    };
    return (
      <button type="button" id={id} className="rjsf-add-optional-data" onClick={add} title={label}>
        + Add
      </button>
    );
  }
  if (onRemoveClick) {
    const remove = () => {
      setSection(sectionId(id), false);
      onRemoveClick();
    };
    return (
      <button type="button" id={id} className="rjsf-remove-optional-data" onClick={remove} title={label}>
        Remove
      </button>
    );
  }
  return <em id={id} className="kg-muted">{label}</em>;
}

export const buttonTemplates = {
  AddButton: ({ id, className, onClick, disabled }) => (
    <div className="kg-add-row">
      <TextButton id={id} className={className} label="+ Add" onClick={onClick} disabled={disabled} title="Add an item" />
    </div>
  ),
  RemoveButton: ({ id, className, onClick, disabled }) => (
    <TextButton id={id} className={className} kind="danger-ghost" label="Remove" onClick={onClick} disabled={disabled} />
  ),
  MoveUpButton: ({ id, className, onClick, disabled }) => (
    <TextButton id={id} className={className} kind="ghost" label="↑" title="Move up" onClick={onClick} disabled={disabled} />
  ),
  MoveDownButton: ({ id, className, onClick, disabled }) => (
    <TextButton id={id} className={className} kind="ghost" label="↓" title="Move down" onClick={onClick} disabled={disabled} />
  ),
  CopyButton: ({ id, className, onClick, disabled }) => (
    <TextButton id={id} className={className} kind="ghost" label="Copy" title="Duplicate" onClick={onClick} disabled={disabled} />
  ),
  ClearButton: ({ id, className, onClick, disabled }) => (
    <TextButton id={id} className={className} kind="ghost" label="Clear" onClick={onClick} disabled={disabled} />
  ),
  SubmitButton: () => null,
};

const DefaultObjectFieldTemplate = getDefaultRegistry().templates.ObjectFieldTemplate;

const hasValue = (value) =>
  value !== undefined && !(value && typeof value === "object" && !Array.isArray(value) && !Object.keys(value).length);

/**
 * The form's top level: the fields the chosen kind and check use, then the rest folded under
 * "Advanced" (open when one of them holds a value or a problem). Nested objects keep rjsf's template.
 */
export function RootObjectFieldTemplate(props) {
  const { fieldPathId, properties, uiSchema, formData, registry } = props;
  const advanced = (getUiOptions(uiSchema).advanced || []);
  if (fieldPathId.$id !== "root" || !advanced.length) return <DefaultObjectFieldTemplate {...props} />;
  const main = properties.filter((prop) => !advanced.includes(prop.name));
  const rest = properties.filter((prop) => advanced.includes(prop.name));
  const filled = rest.some((prop) => hasValue((formData || {})[prop.name]));
  const forced = Boolean(registry.formContext && registry.formContext.openAdvanced);
  return (
    <fieldset id={fieldPathId.$id} className="kg-root-fields">
      {main.map((prop) => prop.content)}
      {rest.length ? <AdvancedFields names={rest.map((prop) => prop.name)} open={filled || forced}>{rest.map((prop) => prop.content)}</AdvancedFields> : null}
    </fieldset>
  );
}

function AdvancedFields({ names, open, children }) {
  const [expanded, setExpanded] = useState(open);
  useEffect(() => {
    if (open) setExpanded(true);
  }, [open]);
  return (
    <details className="kg-advanced" open={expanded} onToggle={(event) => setExpanded(event.currentTarget.open)}>
      <summary>
        Advanced <span className="kg-muted">({names.length} fields this kind and check do not use)</span>
      </summary>
      <div className="kg-advanced__body">{children}</div>
    </details>
  );
}
