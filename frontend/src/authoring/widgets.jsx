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

/** "+ Add" / "Remove" for an optional object, in place of rjsf's icon buttons. */
export function OptionalDataControlsTemplate({ id, label, onAddClick, onRemoveClick }) {
  if (onAddClick) {
    return (
      <button type="button" id={id} className="rjsf-add-optional-data" onClick={onAddClick} title={label}>
        + Add
      </button>
    );
  }
  if (onRemoveClick) {
    return (
      <button type="button" id={id} className="rjsf-remove-optional-data" onClick={onRemoveClick} title={label}>
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
