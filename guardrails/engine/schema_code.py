"""A JSON Schema compiled to Python code that proves documents valid, without jsonschema_rs.

The CI command validates every trace and guardrail. jsonschema_rs costs about 9 MB of its
memory (the library, its start-up allocations, each compiled schema): a third of the run.
The console's schemas use few keywords, so `generate` writes each as one Python function.
It costs more CPU than jsonschema_rs per document, and no memory.

It answers one question: is this document certainly valid? True is a proof; False means
"not proven", and the caller (schema.CompiledSchema) then asks jsonschema_rs, which
decides, and the Python `jsonschema`, which explains. So the code may be stricter than the
schema, never looser:

- a keyword it does not know, or a form of one it does not handle exactly, makes
  `generate` raise Unsupported (the schema then goes to jsonschema_rs alone);
- `date-time` is proven in the common layouts (RFC 3339 with upper-case T and Z, a real
  calendar day, no leap second); any other string is left to jsonschema_rs;
- a type JSON does not have (a tuple, a subclass, a Decimal), a float that is not finite,
  an integral float where an integer is asked, an integer beyond 64 bits, a non-string
  key: not proven;
- `oneOf` and `anyOf` count exact answers of their branches: a branch that cannot decide
  raises `Unsure`, which makes the whole document "not proven".

The code is generated from the schema alone, every name and value written with repr(); what
it calls beyond expressions is in schema_code_helpers.py.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import orjson

from guardrails.engine import schema_code_helpers as helpers
from guardrails.engine.schema_code_helpers import regex

#: Keywords that say nothing about validity, with the type their value must have.
_ANNOTATIONS: dict[str, type | tuple[type, ...]] = {
    "title": str,
    "description": str,
    "$comment": str,
    "examples": list,
    "deprecated": bool,
    "readOnly": bool,
    "writeOnly": bool,
}
#: Keywords allowed at the root only (a nested $id would change the base of $ref).
_ROOT_ONLY = {"$schema", "$id", "$defs"}
_TYPES = {
    "string": "type({v}) is str",
    "object": "type({v}) is dict",
    "array": "type({v}) is list",
    "boolean": "type({v}) is bool",
    "null": "{v} is None",
    "integer": "(type({v}) is int and LOW < {v} < BIG)",
    "number": "(type({v}) is int and LOW < {v} < BIG or type({v}) is float and NO_END < {v} < END)",
}
#: Patterns whose meaning is the same in Python's re (with `$` at the end read as `\Z`)
#: and in jsonschema_rs: literal letters, digits and `._:-`, classes of them, quantifiers.
_SAFE_PATTERN = r"\^?(?:\[\^?(?:[A-Za-z0-9._:-])+\]|[A-Za-z0-9_:-]|\\\.|[*+?]|\{\d+(?:,\d*)?\})*\$?"
_URL = r"https?://[^\s#]+"


class Unsupported(Exception):
    """The schema uses a keyword, or a form of one, that the generated code does not prove."""


class _Writer:
    def __init__(self, root: Mapping[str, Any], json_values: bool) -> None:
        self.root = root
        self.json_values = json_values
        self.inlining: set[str] = set()
        self.lines: list[str] = []
        self.constants: dict[str, object] = {}
        self.constant_sources: dict[str, str] = {}  # each constant as Python source (module_source)
        self.functions: dict[str, str] = {}  # $ref -> function name
        self.pending: list[tuple[str, Any]] = []
        self.count = 0

    def name(self, prefix: str) -> str:
        self.count += 1
        return f"{prefix}{self.count}"

    def constant(self, value: object, source: str) -> str:
        """A name for `value`, which `source` (Python source) evaluates to in the namespace."""
        name = self.name("_c")
        self.constants[name] = value
        self.constant_sources[name] = source
        return name

    def function(self, schema: Any) -> str:
        """A function of its own for `schema` (a $ref target, a branch of oneOf)."""
        name = self.name("_f")
        self.pending.append((name, schema))
        return name

    def write_function(self, name: str, schema: Any, root: bool = False) -> None:
        """The root's body within `try`: what no branch could decide is "not proven"."""
        body: list[str] = []
        self.dates, pad = False, "        " if root else "    "
        self.node(schema, "x", body, len(pad) // 4, root)
        self.lines += [f"def {name}(x):"] + (["    try:"] if root else [])
        if self.dates:  # its date-times, collected as they come, are tested at the end
            self.lines.append(f"{pad}_d = []")
        self.lines.extend(body)
        if self.dates:
            self.lines.append(f"{pad}if _d: date_times(_d)")
        self.lines.append(f"{pad}return True")
        if root:
            self.lines += ["    except (Unsure, RecursionError):", "        return False"]

    def node(self, schema: Any, v: str, out: list[str], depth: int, root: bool = False) -> None:
        pad = "    " * depth
        if schema is True:
            self.plain(v, out, pad)
            return
        if schema is False:
            out.append(f"{pad}return False")
            return
        if not isinstance(schema, Mapping):
            raise Unsupported("a schema must be an object or a boolean")
        keys = set(schema)
        for key in keys & set(_ANNOTATIONS):
            if not isinstance(schema[key], _ANNOTATIONS[key]):
                raise Unsupported(f"'{key}' of the wrong type")
        keys -= set(_ANNOTATIONS) | {"default"} | {key for key in keys if key.startswith("x-")}
        if root:
            keys -= self._root_keywords(schema)
        elif keys & _ROOT_ONLY:
            raise Unsupported("$id, $schema or $defs below the root")
        types = self._types(schema.get("type"))
        keys.discard("type")
        if types is not None:
            test = " or ".join(_TYPES[t].format(v=v) for t in types)
            out.append(f"{pad}if not ({test}) and not type_miss({v}): return False")
        if "$ref" in keys:
            self._inline_ref(schema["$ref"], v, out, depth)
            keys.discard("$ref")
        self._enum(schema, keys, v, out, pad)
        self._combinations(schema, keys, v, out, pad)
        constrained = self._strings(schema, keys, v, out, pad, types)
        constrained |= self._numbers(schema, keys, v, out, pad, types)
        constrained |= self._objects(schema, keys, v, out, depth, types)
        constrained |= self._arrays(schema, keys, v, out, depth, types)
        if keys:
            raise Unsupported(f"keywords {sorted(keys)}")
        # What no keyword looked into is walked: it must hold JSON's own types only.
        free = (
            types is None and not constrained and not {"$ref", "enum", "const", "allOf", "anyOf", "oneOf"} & set(schema)
        )
        free = free or (
            types is not None and "object" in types and not {"properties", "additionalProperties"} & set(schema)
        )
        free = free or (types is not None and "array" in types and "items" not in schema)
        if free:
            self.plain(v, out, pad)

    def plain(self, v: str, out: list[str], pad: str) -> None:
        if not self.json_values:
            out.append(f"{pad}plain({v})")

    def _inline_ref(self, ref: Any, v: str, out: list[str], depth: int) -> None:
        """The referenced schema's code in place, or a call to its function when recursive."""
        function = self._ref(ref)
        if ref in self.inlining:
            out.append(f"{'    ' * depth}if not {function}({v}): return False")
            return
        self.inlining.add(ref)
        try:
            self.node(self.root["$defs"][ref[len("#/$defs/") :]], v, out, depth)
        finally:
            self.inlining.discard(ref)

    def _root_keywords(self, schema: Mapping[str, Any]) -> set[str]:
        found = set()
        if "$schema" in schema:
            if schema["$schema"] != "https://json-schema.org/draft/2020-12/schema":
                raise Unsupported("a $schema other than Draft 2020-12")
            found.add("$schema")
        if "$id" in schema:
            if not isinstance(schema["$id"], str) or not regex(_URL).fullmatch(schema["$id"]):
                raise Unsupported("$id must be an http(s) URL")
            found.add("$id")
        if "$defs" in schema:
            defs = schema["$defs"]
            if not isinstance(defs, Mapping):
                raise Unsupported("$defs must be an object")
            for name in defs:  # every definition is compiled, so that every one is checked
                self._ref(f"#/$defs/{name}")
            found.add("$defs")
        return found

    def _types(self, value: Any) -> list[str] | None:
        if value is None:
            return None
        types = [value] if isinstance(value, str) else value
        if not isinstance(types, list) or not types or any(t not in _TYPES for t in types):
            raise Unsupported("type must name JSON types")
        if len(set(types)) != len(types):
            raise Unsupported("type names a type twice")
        return list(types)

    def _ref(self, ref: Any) -> str:
        defs = self.root.get("$defs")
        if not isinstance(ref, str) or not ref.startswith("#/$defs/") or not isinstance(defs, Mapping):
            raise Unsupported("only references to #/$defs/NAME")
        name = ref[len("#/$defs/") :]
        if "/" in name or "~" in name or name not in defs:
            raise Unsupported(f"unresolved reference {ref}")
        if ref not in self.functions:
            self.functions[ref] = self.function(defs[name])
        return self.functions[ref]

    def _enum(self, schema: Mapping[str, Any], keys: set[str], v: str, out: list[str], pad: str) -> None:
        for keyword in sorted({"enum", "const"} & keys):
            values = schema[keyword] if keyword == "enum" else [schema[keyword]]
            if not isinstance(values, list) or not values:
                raise Unsupported(f"{keyword} must list values")
            if not all(isinstance(item, str) or item is None or item is True or item is False for item in values):
                raise Unsupported(f"{keyword} of values other than strings, booleans and null")
            tests = [f"{v} is {item!r}" for item in values if not isinstance(item, str)]
            strings = frozenset(item for item in values if isinstance(item, str))
            if strings:
                tests.append(f"type({v}) is str and {v} in {self.constant(strings, _set_source(strings))}")
            # Not listed: certainly not valid, unless the type is one JSON does not have.
            out.append(f"{pad}if not ({' or '.join(tests)}): return type_miss({v})")
            keys.discard(keyword)

    def _combinations(self, schema: Mapping[str, Any], keys: set[str], v: str, out: list[str], pad: str) -> None:
        for keyword in sorted({"allOf", "anyOf", "oneOf"} & keys):
            branches = schema[keyword]
            if not isinstance(branches, list) or not branches:
                raise Unsupported(f"{keyword} must be a non-empty array")
            calls = ", ".join(f"{self.function(branch)}({v})" for branch in branches)
            # Each branch is called with the exceptions of its own: an unsure branch makes
            # the document unsure (an exact count is needed for oneOf and anyOf).
            test = {"allOf": f"all(({calls},))", "anyOf": f"any(({calls},))", "oneOf": f"sum(({calls},)) == 1"}
            out.append(f"{pad}if not {test[keyword]}: return False")
            keys.discard(keyword)

    def _strings(
        self, schema: Mapping[str, Any], keys: set[str], v: str, out: list[str], pad: str, types: list[str] | None
    ) -> bool:
        checks = []
        if "minLength" in keys and "maxLength" in keys:  # one len() for both
            low, high = _whole(schema["minLength"], "minLength"), _whole(schema["maxLength"], "maxLength")
            checks.append(f"{low} <= len({v}) <= {high}")
            keys -= {"minLength", "maxLength"}
        for keyword, op in (("minLength", ">="), ("maxLength", "<=")):
            if keyword in keys:
                checks.append(f"len({v}) {op} {_whole(schema[keyword], keyword)}")
                keys.discard(keyword)
        if "format" in keys:
            if schema["format"] != "date-time":
                raise Unsupported(f"format {schema['format']!r}")
            if types is None or "string" not in types:
                raise Unsupported("format without type string")
            self.dates = True
            guard = "" if types == ["string"] else f"if type({v}) is str: "
            out.append(f"{pad}{guard}_d.append({v})")
            keys.discard("format")
        if "pattern" in keys:
            pattern = schema["pattern"]
            if not isinstance(pattern, str) or not regex(_SAFE_PATTERN).fullmatch(pattern):
                raise Unsupported("a pattern beyond letters, digits, classes and quantifiers")
            python = pattern[:-1] + r"\Z" if pattern.endswith("$") else pattern
            search = self.constant(re.compile(python).search, f"regex({python!r}).search")
            checks.append(f"{search}({v}) is not None")
            keys.discard("pattern")
        if not checks:
            return False
        if not types or "string" not in types:
            raise Unsupported("string keywords without type string")
        guard = "" if types == ["string"] else f"type({v}) is not str or "
        out.append(f"{pad}if not ({guard}{' and '.join(checks)}): return False")
        return True

    def _numbers(
        self, schema: Mapping[str, Any], keys: set[str], v: str, out: list[str], pad: str, types: list[str] | None
    ) -> bool:
        checks = []
        for keyword, op in (("minimum", ">="), ("maximum", "<="), ("exclusiveMinimum", ">"), ("exclusiveMaximum", "<")):
            if keyword in keys:
                bound = schema[keyword]
                if type(bound) not in (int, float) or not math.isfinite(bound):
                    raise Unsupported(f"{keyword} must be a number")
                checks.append(f"{v} {op} {bound!r}")
                keys.discard(keyword)
        if not checks:
            return False
        if types is None or not set(types) <= {"integer", "number"}:
            raise Unsupported("number keywords without a numeric type")
        out.append(f"{pad}if not ({' and '.join(checks)}): return False")
        return True

    def _objects(
        self, schema: Mapping[str, Any], keys: set[str], v: str, out: list[str], depth: int, types: list[str] | None
    ) -> bool:
        mine = {"properties", "required", "additionalProperties", "minProperties", "maxProperties"} & keys
        if not mine:
            return False
        if types != ["object"]:
            raise Unsupported("object keywords without type object")
        keys -= mine
        pad = "    " * depth
        properties = schema.get("properties", {})
        required = schema.get("required", [])
        if not isinstance(properties, Mapping) or not isinstance(required, list):
            raise Unsupported("properties must be an object, required an array")
        if not all(isinstance(name, str) for name in [*properties, *required]) or len(set(required)) != len(required):
            raise Unsupported("property names must be strings, required ones each once")
        for keyword, op in (("minProperties", ">="), ("maxProperties", "<=")):
            if keyword in schema:
                out.append(f"{pad}if not len({v}) {op} {_whole(schema[keyword], keyword)}: return False")
        for name in required:  # (frozenset.issubset would first copy the keys into a set)
            out.append(f"{pad}if {name!r} not in {v}: return False")
        extra = schema.get("additionalProperties", True)
        known = self.constant(frozenset(properties), _set_source(properties))
        k = self.name("_k")
        if extra is False:
            out.append(f"{pad}if not {known}.issuperset({v}):")
            out.append(f"{pad}    for {k} in {v}:")
            out.append(f"{pad}        if type({k}) is not str: raise Unsure")
            out.append(f"{pad}    return False")
        else:
            item = self.name("_a")
            out.append(f"{pad}for {k}, {item} in {v}.items():")
            out.append(f"{pad}    if type({k}) is not str: raise Unsure")
            out.append(f"{pad}    if {k} not in {known}:")
            extra_body: list[str] = []
            self.node(extra, item, extra_body, depth + 2)
            out.extend(extra_body or [f"{pad}        pass"])
        for name, subschema in properties.items():
            item = self.name("_p")
            if name in required:  # present: the required test came first
                body: list[str] = []
                self.node(subschema, item, body, depth)
                if body:
                    out.append(f"{pad}{item} = {v}[{name!r}]")
                    out.extend(body)
                continue
            body = []
            self.node(subschema, item, body, depth + 1)
            if body:
                out.append(f"{pad}if {name!r} in {v}:")
                out.append(f"{pad}    {item} = {v}[{name!r}]")
                out.extend(body)
        return True

    def _arrays(
        self, schema: Mapping[str, Any], keys: set[str], v: str, out: list[str], depth: int, types: list[str] | None
    ) -> bool:
        mine = {"items", "minItems", "maxItems", "uniqueItems"} & keys
        if not mine:
            return False
        if types != ["array"]:
            raise Unsupported("array keywords without type array")
        keys -= mine
        pad = "    " * depth
        for keyword, op in (("minItems", ">="), ("maxItems", "<=")):
            if keyword in schema:
                out.append(f"{pad}if not len({v}) {op} {_whole(schema[keyword], keyword)}: return False")
        unique = schema.get("uniqueItems", False)
        if not isinstance(unique, bool):
            raise Unsupported("uniqueItems must be true or false")
        if unique:
            out.append(f"{pad}if not unique_strings({v}): return False")
        if "items" in schema:
            item = self.name("_i")
            out.append(f"{pad}for {item} in {v}:")
            body: list[str] = []
            self.node(schema["items"], item, body, depth + 1)
            out.extend(body or [f"{pad}    pass"])
        return True


def _whole(value: Any, keyword: str) -> int:
    if type(value) is not int or value < 0:
        raise Unsupported(f"{keyword} must be a whole number")
    return value


def generate(schema: Mapping[str, Any], *, json_values: bool = False) -> Callable[[object], bool]:
    """A function telling whether a document is certainly valid against `schema`;
    Unsupported when the schema uses what the generated code does not prove.

    `json_values`: the documents are known to be made of JSON's own types (parsed by
    orjson: dict, list, str, int within 64 bits, finite float, bool, None, string keys),
    so that what no keyword constrains is not walked to check it.

    The console's own schemas come generated already (schema_proofs.py, written by
    `make proofs`): compiling their code costs 10 to 20 ms, a run's start-up."""
    made = written_ahead(schema) if json_values else None
    if made is not None:
        return made()
    writer = _writer(schema, json_values)
    source = "\n".join(writer.lines)
    namespace: dict[str, Any] = {**HELPERS, **writer.constants}
    exec(compile(source, "<schema_code>", "exec"), namespace)  # noqa: S102 - our own generated code
    root: Callable[[object], bool] = namespace["_root"]
    return root


def written_ahead(schema: Mapping[str, Any]) -> Callable[[], Callable[[object], bool]] | None:
    """What makes the schema's proof (for JSON values) in schema_proofs.py, None for a schema
    that is not one of the console's own (a schema written there is one the generator took,
    so a valid one: it checks every keyword's value)."""
    # (imported here, not at the top: `make proofs` rewrites that module through this one,
    # which must import even when the file written last time no longer does)
    from guardrails.engine.schema_proofs import PROOFS

    try:
        key = _canonical(schema)
    except TypeError:  # not JSON (a pack's schema may hold anything): none of ours
        return None
    made: Callable[[], Callable[[object], bool]] | None = PROOFS.get(key)
    return made


def _writer(schema: Mapping[str, Any], json_values: bool) -> _Writer:
    writer = _Writer(schema, json_values)
    writer.write_function("_root", schema, root=True)
    while writer.pending:
        name, subschema = writer.pending.pop()
        writer.write_function(name, subschema)
    return writer


def _canonical(schema: Mapping[str, Any]) -> bytes:
    """The schema as JSON with its keys sorted: what schema_proofs knows it by."""
    return orjson.dumps(schema, option=orjson.OPT_SORT_KEYS)


def _set_source(strings: Iterable[str]) -> str:
    return f"frozenset({tuple(sorted(strings))!r})"


#: What the generated code calls, besides its constants.
HELPERS: dict[str, Any] = {name: getattr(helpers, name) for name in helpers.__all__}


def module_source(schemas: Iterable[Mapping[str, Any]]) -> str:
    """schema_proofs.py: each schema's generated code (json_values) as a function making
    its proof, and PROOFS, those functions by the schema's canonical JSON. Schemas the
    generator does not take are left out."""
    out = [
        '"""The console\'s own schemas compiled to Python code that proves documents valid',
        "(guardrails/engine/schema_code.py), written by `make proofs`: do not edit.",
        "",
        "A test fails when this file is not what the schemas and the generator give today.",
        '"""',
        "",
        "# ruff: noqa",
        "# mypy: ignore-errors",
        f"from guardrails.engine.schema_code_helpers import {', '.join(sorted(HELPERS))}",
        "",
    ]
    keys: dict[bytes, str] = {}
    for schema in schemas:
        key = _canonical(schema)
        if key in keys:
            continue
        try:
            writer = _writer(schema, json_values=True)
        except Unsupported:
            continue
        name = keys[key] = f"_proof{len(keys) + 1}"
        out += ["", f"def {name}():"]
        out += [f"    {constant} = {source}" for constant, source in writer.constant_sources.items()]
        out += [f"    {line}" for line in writer.lines]
        out += ["    return _root", ""]
    out += ["", "PROOFS = {"] + [f"    {key!r}: {name}," for key, name in keys.items()] + ["}", ""]
    return "\n".join(out)
