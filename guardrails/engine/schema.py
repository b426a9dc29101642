"""Validation against the published schemas, with messages a person understands.

Each schema is compiled twice: `jsonschema_rs` (Rust) decides valid or invalid, which is
what the hot paths (ingestion, the CI command over thousands of traces) pay for; the
Python `jsonschema` library is imported only when a document is invalid, to explain every
error with the JSON pointer of its field. Importing `jsonschema` with its format checkers
costs more than a second, which a valid CI run never pays.

A caller whose documents all come from orjson (the CI commands) says so with
`json_values=True`: then a document is first given to Python code generated from the schema
(guardrails/engine/schema_code.py; the console's own schemas come generated ahead, in
schema_proofs.py) that proves it valid, and jsonschema_rs is imported and compiled only for
a document it does not prove (an invalid one) or a schema it does not handle. That keeps
jsonschema_rs's 9 MB out of a run whose documents are valid; the answers are the same, since
the generated code only ever says "valid" where jsonschema_rs would. Other callers (a trace
built in Python by OTLP ingestion may hold a NaN or a tuple) leave it False.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import os
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from contextlib import suppress
from datetime import datetime
from functools import cache
from typing import Any

import orjson

from guardrails.engine import schema_code
from guardrails.engine.types import Issue

# (os.path, not pathlib: pathlib imports urllib.parse and ipaddress, which the CI command
# would load for this alone)
SPEC_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.realpath(__file__))), "spec")

#: Defaults of runtrace.md's limits; the console passes its settings instead.
MAX_DEPTH = 64
MAX_TRACE_BYTES = 1024 * 1024


def _load_schema(name: str) -> dict[str, Any]:
    with open(os.path.join(SPEC_DIR, name), encoding="utf-8") as handle:
        schema: dict[str, Any] = json.load(handle)
    return schema


GUARDRAIL_SCHEMA: dict[str, Any] = _load_schema("guardrail.schema.json")
RUNTRACE_SCHEMA: dict[str, Any] = _load_schema("runtrace.schema.json")
#: The console's own limits on a guardrail (its columns' lengths, the id alphabet).
CONSOLE_LIMITS_SCHEMA: dict[str, Any] = _load_schema("console-limits.schema.json")


class SchemaCompileError(ValueError):
    """A JSON Schema that is not a valid Draft 2020-12 schema, or does not compile."""


def _rs() -> Any:
    return importlib.import_module("jsonschema_rs")


_NOT_YET: Any = object()


class CompiledSchema:
    """A Draft 2020-12 schema ready to validate many documents, with formats checked.

    Each validator is made when first needed: the proof for JSON values (see the module's
    doc), jsonschema_rs for what it does not prove, jsonschema to explain an invalid one."""

    def __init__(self, schema: Mapping[str, Any]) -> None:
        self.schema = schema
        self._fast: Any = None
        self._proof: Callable[[object], bool] | None = _NOT_YET
        self._detailed: Any = None

    def fast(self) -> Any:
        """jsonschema_rs's validator (SchemaCompileError for a schema it cannot compile)."""
        if self._fast is None:
            try:
                self._fast = _rs().validator_for(dict(self.schema), validate_formats=True)
            except Exception as exc:  # jsonschema_rs raises ValidationError or ValueError
                raise SchemaCompileError(_first_line(str(exc))) from exc
        return self._fast

    @property
    def proof(self) -> Callable[[object], bool] | None:
        """The generated code proving documents of JSON values valid, None for a schema the
        generator does not take."""
        if self._proof is _NOT_YET:
            self._proof = None
            with suppress(schema_code.Unsupported):
                self._proof = schema_code.generate(self.schema, json_values=True)
        return self._proof

    def is_valid(self, doc: object, *, json_values: bool = False) -> bool:
        """`json_values`: `doc` is made of JSON's own types, as orjson parses it."""
        if json_values:
            proof = self.proof
            if proof is not None and proof(doc):
                return True
        fast = self.fast()
        try:
            return bool(fast.is_valid(doc))
        except (ValueError, TypeError):  # not a JSON value (a tuple, a non-string key ...)
            return False

    def issues(self, doc: object, *, base_path: str = "", json_values: bool = False) -> list[Issue]:
        """Every error in `doc`, each with its JSON pointer (prefixed by `base_path`)."""
        if self.is_valid(doc, json_values=json_values):
            return []
        found = _explain(self._detailed_validator(), doc, base_path)
        if found:
            return found
        # The fast validator refused something the detailed one accepts (a value that is
        # not JSON at all); say so rather than let it through.
        return [Issue(base_path or "", "is not a valid JSON value")]

    def _detailed_validator(self) -> Any:
        if self._detailed is None:
            # Imported here, and only invalid documents need it.
            validator_class = _jsonschema().Draft202012Validator
            self._detailed = validator_class(self.schema, format_checker=_format_checker())
        return self._detailed


def _jsonschema() -> Any:
    """jsonschema, imported without rfc3987_syntax where that is installed (jsonschema's
    format-nongpl extra brings it): its import builds a Lark grammar, 1.4 s on a quiet
    machine and 3 s under load, paid by the first invalid document of a run. Its "iri"
    formats are checked by _format_checker, which imports it when one is first checked."""
    if "jsonschema" in sys.modules:
        return sys.modules["jsonschema"]
    blocked = "rfc3987_syntax" not in sys.modules
    if blocked:
        sys.modules["rfc3987_syntax"] = None  # type: ignore[assignment]  # (an import of it raises ImportError)
    try:
        return importlib.import_module("jsonschema")
    finally:
        if blocked:
            del sys.modules["rfc3987_syntax"]


@cache
def _format_checker() -> Any:
    """Draft 2020-12's format checker, with "iri" and "iri-reference" checked by
    rfc3987_syntax, imported at their first check, when it is installed and jsonschema's
    import did not check them already (as it does with the rfc3987 package)."""
    jsonschema = _jsonschema()
    checker = jsonschema.FormatChecker()
    checker.checkers = dict(jsonschema.Draft202012Validator.FORMAT_CHECKER.checkers)
    if importlib.util.find_spec("rfc3987_syntax") is None:
        return checker
    for name, rule in (("iri", "iri"), ("iri-reference", "iri_reference")):
        if name not in checker.checkers:
            checker.checks(name, raises=ValueError)(_iri_check(rule))
    return checker


def _iri_check(rule: str) -> Callable[[object], bool]:
    def check(instance: object) -> bool:
        if not isinstance(instance, str):
            return True
        is_valid_syntax = importlib.import_module("rfc3987_syntax").is_valid_syntax
        return bool(is_valid_syntax(rule, instance))

    return check


def compile_schema(schema: object) -> CompiledSchema:
    """Compile `schema`, refusing one that is not a valid Draft 2020-12 schema."""
    if not isinstance(schema, Mapping):
        raise SchemaCompileError("a JSON Schema must be an object")
    if schema_code.written_ahead(schema) is not None:  # the console's own, valid
        return CompiledSchema(schema)
    meta = _rs().meta
    try:
        valid = meta.is_valid(dict(schema))
    except Exception as exc:
        raise SchemaCompileError(_first_line(str(exc))) from exc
    if not valid:
        try:
            meta.validate(dict(schema))
        except Exception as exc:
            raise SchemaCompileError(_first_line(str(exc))) from exc
    compiled = CompiledSchema(schema)
    compiled.fast()  # (an unresolvable $ref passes the meta-schema: refused here)
    return compiled


def _first_line(text: str) -> str:
    return text.strip().splitlines()[0] if text.strip() else "the schema does not compile"


@cache
def _guardrail_validator() -> CompiledSchema:
    return CompiledSchema(GUARDRAIL_SCHEMA)


@cache
def _runtrace_validator() -> CompiledSchema:
    return CompiledSchema(RUNTRACE_SCHEMA)


_compiled_by_text: dict[bytes, CompiledSchema] = {}


def validate_against(
    schema: Mapping[str, Any], doc: object, *, base_path: str = "", json_values: bool = False
) -> list[Issue]:
    """Validate `doc` against any Draft 2020-12 `schema`, with formats checked."""
    key = orjson.dumps(schema, option=orjson.OPT_SORT_KEYS)
    compiled = _compiled_by_text.get(key)
    if compiled is None:
        if len(_compiled_by_text) > 256:  # keep the cache bounded in a long-lived server
            _compiled_by_text.clear()
        compiled = _compiled_by_text[key] = CompiledSchema(schema)
    return compiled.issues(doc, base_path=base_path, json_values=json_values)


def validate_guardrail_document(doc: object, *, json_values: bool = False) -> list[Issue]:
    """Every error of a guardrail document against schema 1.1.0."""
    return _validate_with_limits(_guardrail_validator(), doc, MAX_DEPTH, json_values)


def validate_console_limits(doc: object) -> list[Issue]:
    """Every error of a guardrail document against the console's limits (a document valid
    against schema 1.1.0 may still be too long to store, or have an id no URL can carry)."""
    return _console_limits_validator().issues(doc)


@cache
def _console_limits_validator() -> CompiledSchema:
    return CompiledSchema(CONSOLE_LIMITS_SCHEMA)


def validate_runtrace(doc: object, *, max_depth: int = MAX_DEPTH, json_values: bool = False) -> list[Issue]:
    """Every error of a RunTrace: the schema, endedAt >= startedAt, NUL characters, depth."""
    issues = _validate_with_limits(_runtrace_validator(), doc, max_depth, json_values)
    if not issues and isinstance(doc, Mapping):
        issues = _check_time_order(doc)
    return issues


def bracket_count(text: bytes) -> int:
    """How many `[` and `{` a JSON text holds, strings included: a bound on its nesting.

    One pass deleting them, where two `bytes.count` would each loop over every byte (a loop
    that Debian's optimised CPython build runs at half this speed)."""
    return len(text) - len(text.translate(None, b"[{"))


def validate_runtrace_line(
    raw: bytes, doc: object, *, max_depth: int = MAX_DEPTH, brackets: int | None = None, json_values: bool = False
) -> list[Issue]:
    """`validate_runtrace` for a trace parsed from `raw`, skipping the walk over every value
    when the raw text proves it needless (no NUL escape, fewer brackets than the limit).
    `brackets`: bracket_count(raw), when the caller has counted them."""
    if brackets is None:
        brackets = bracket_count(raw)
    if not _walk_needless(raw, brackets, max_depth):
        return validate_runtrace(doc, max_depth=max_depth, json_values=json_values)
    compiled = _runtrace_validator()
    if not compiled.is_valid(doc, json_values=json_values):
        return compiled.issues(doc, json_values=json_values)
    return _check_time_order(doc) if type(doc) is dict or isinstance(doc, Mapping) else []


def runtrace_line_validator(
    max_depth: int = MAX_DEPTH, *, json_values: bool = False
) -> Callable[[bytes, object, int], list[Issue]]:
    """`validate_runtrace_line(raw, doc, max_depth=max_depth, brackets=brackets,
    json_values=json_values)` as a function of (raw, doc, brackets), for a loop over many
    traces (the CI command): a trace the schema's proof finds valid goes straight to the
    time order; any other goes through validate_runtrace_line, which explains."""
    compiled = _runtrace_validator()
    proof = compiled.proof if json_values else None
    if proof is None:
        proof = compiled.is_valid

    def validate(raw: bytes, doc: object, brackets: int) -> list[Issue]:
        if _walk_needless(raw, brackets, max_depth) and type(doc) is dict and proof(doc):
            return _check_time_order(doc)
        return validate_runtrace_line(raw, doc, max_depth=max_depth, brackets=brackets, json_values=json_values)

    return validate


def _walk_needless(raw: bytes, brackets: int, max_depth: int) -> bool:
    """Whether the raw text proves the walk over every value needless: too few brackets to
    nest too deep, and no NUL written as an escape (memchr finds the backslash fast)."""
    return brackets <= max_depth and (b"\\" not in raw or b"\\u0000" not in raw)


def _validate_with_limits(compiled: CompiledSchema, doc: object, max_depth: int, json_values: bool) -> list[Issue]:
    issues = check_json_limits(doc, max_depth=max_depth)
    if any(issue.message.startswith("is nested deeper") for issue in issues):
        return issues  # too deep to walk further
    return issues + compiled.issues(doc, json_values=json_values)


def _check_time_order(trace: Mapping[str, Any]) -> list[Issue]:
    started, ended = trace.get("startedAt"), trace.get("endedAt")
    if not (isinstance(started, str) and isinstance(ended, str)):
        return []
    if _same_utc_layout(started, ended):  # the common case: text order is time order
        return [Issue("/endedAt", "must not be before startedAt")] if ended < started else []
    try:
        if _parse_time(ended) < _parse_time(started):
            return [Issue("/endedAt", "must not be before startedAt")]
    except ValueError:
        return []  # the format check has already spoken about a malformed time
    return []


def _same_utc_layout(first: str, second: str) -> bool:
    """Two valid date-times (the format check has passed) in UTC (`Z`) with the same length
    and an upper-case `T`: laid out alike, digit for digit, so compared as text."""
    return len(first) == len(second) > 10 and first[-1] == second[-1] == "Z" and first[10] == second[10] == "T"


def _parse_time(text: str) -> datetime:
    return datetime.fromisoformat(text.upper().replace("Z", "+00:00"))


def check_json_limits(doc: object, *, max_depth: int) -> list[Issue]:
    """NUL characters (which PostgreSQL cannot store) and nesting deeper than `max_depth`."""
    issues: list[Issue] = []
    stack: list[tuple[object, str, int]] = [(doc, "", 1)]
    while stack:
        value, path, depth = stack.pop()
        if isinstance(value, str):
            if "\x00" in value:
                issues.append(Issue(path, "must not contain the NUL character (U+0000)"))
        elif isinstance(value, Mapping | list | tuple):
            if depth > max_depth:
                issues.append(Issue(path, f"is nested deeper than {max_depth} levels"))
                continue
            stack.extend(_children(value, path, depth, issues))
    issues.reverse()
    return issues


def _children(
    value: Mapping[Any, Any] | Sequence[Any], path: str, depth: int, issues: list[Issue]
) -> Iterable[tuple[object, str, int]]:
    if isinstance(value, Mapping):
        items: list[tuple[object, str, int]] = []
        for key, item in value.items():
            child = f"{path}/{escape_pointer(str(key))}"
            if isinstance(key, str) and "\x00" in key:
                issues.append(Issue(child, "field name must not contain the NUL character (U+0000)"))
            items.append((item, child, depth + 1))
        items.reverse()
        return items
    return [(item, f"{path}/{index}", depth + 1) for index, item in enumerate(value)][::-1]


def escape_pointer(token: str) -> str:
    """One JSON pointer reference token (RFC 6901)."""
    return token.replace("~", "~0").replace("/", "~1")


def pointer(parts: Iterable[object]) -> str:
    return "".join(f"/{escape_pointer(str(part))}" for part in parts)


# --- messages for people -------------------------------------------------------------

_TYPE_NAMES = {
    "object": "an object",
    "array": "an array",
    "string": "a string",
    "integer": "an integer",
    "number": "a number",
    "boolean": "true or false",
    "null": "null",
}

_FORMAT_NAMES = {
    "date-time": "an RFC 3339 date-time (such as 2026-11-29T10:00:00Z)",
    "date": "an RFC 3339 date (such as 2026-11-29)",
    "uri": "a URI",
    "email": "an email address",
}


def _explain(validator: Any, doc: object, base_path: str) -> list[Issue]:
    issues: list[Issue] = []
    for error in validator.iter_errors(doc):
        issues.extend(_issues_for(error, base_path))
    return list(dict.fromkeys(issues))


def _issues_for(error: Any, base_path: str) -> list[Issue]:
    path = base_path + pointer(error.absolute_path)
    keyword = error.validator
    if keyword == "required":
        missing = _missing_property(error)
        return [Issue(f"{path}/{escape_pointer(missing)}", f"'{missing}' is required")]
    if keyword == "additionalProperties" and isinstance(error.instance, Mapping):
        known = error.schema.get("properties", {})
        return [
            Issue(f"{path}/{escape_pointer(str(name))}", f"unknown field '{name}'")
            for name in error.instance
            if name not in known
        ]
    if keyword == "oneOf":
        return _explain_one_of(error, path, base_path)
    return [Issue(path, _message(keyword, error))]


def _missing_property(error: Any) -> str:
    """The name of the property a `required` error is about (jsonschema only says it in text)."""
    instance = error.instance if isinstance(error.instance, Mapping) else {}
    for name in error.validator_value:
        if name not in instance:
            return str(name)
    return str(error.validator_value[0])


def _message(keyword: str, error: Any) -> str:
    value = error.validator_value
    simple: dict[str, Callable[[], str]] = {
        "enum": lambda: "must be one of: " + ", ".join(_show(item) for item in value),
        "const": lambda: f"must be {_show(value)}",
        "type": lambda: "must be " + " or ".join(_TYPE_NAMES.get(t, t) for t in _as_list(value)),
        "minLength": lambda: "must not be empty" if value == 1 else f"must be at least {value} characters long",
        "maxLength": lambda: f"must be at most {value} characters long",
        "minItems": lambda: f"must have at least {value} item{'s' if value != 1 else ''}",
        "maxItems": lambda: f"must have at most {value} item{'s' if value != 1 else ''}",
        "uniqueItems": lambda: "must not contain the same item twice",
        "minimum": lambda: f"must be at least {_show(value)}",
        "maximum": lambda: f"must be at most {_show(value)}",
        "exclusiveMinimum": lambda: f"must be greater than {_show(value)}",
        "exclusiveMaximum": lambda: f"must be less than {_show(value)}",
        "format": lambda: "must be " + _FORMAT_NAMES.get(value, f"a valid {value}"),
        "pattern": lambda: f"must match the pattern {value}",
        "minProperties": lambda: f"must have at least {value} field{'s' if value != 1 else ''}",
    }
    explain = simple.get(keyword)
    return explain() if explain else str(error.message)


def _as_list(value: object) -> list[str]:
    return [str(item) for item in value] if isinstance(value, list) else [str(value)]


def _show(value: object) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value)


def _explain_one_of(error: Any, path: str, base_path: str) -> list[Issue]:
    """A discriminated union (`network`, `codeArtifactRef`): explain the variant whose
    `kind` matches, or say which kinds there are."""
    variants: list[Mapping[str, Any]] = list(error.validator_value)
    instance = error.instance
    if not isinstance(instance, Mapping):
        return [Issue(path, "must be an object")]
    kinds = [kind for variant in variants for kind in _variant_kinds(variant)]
    if not kinds:
        return [Issue(path, "must match exactly one of the allowed shapes")]
    if "kind" not in instance:
        return [Issue(f"{path}/kind", "'kind' is required")]
    chosen = [i for i, variant in enumerate(variants) if instance["kind"] in _variant_kinds(variant)]
    if not chosen:
        return [Issue(f"{path}/kind", "must be one of: " + ", ".join(kinds))]
    issues: list[Issue] = []
    for sub in error.context:
        if sub.schema_path and sub.schema_path[0] == chosen[0]:
            issues.extend(_issues_for(sub, base_path))
    return issues or [Issue(path, str(error.message))]


def _variant_kinds(variant: Mapping[str, Any]) -> list[str]:
    kind = variant.get("properties", {}).get("kind", {})
    if "const" in kind:
        return [str(kind["const"])]
    return [str(item) for item in kind.get("enum", [])]
