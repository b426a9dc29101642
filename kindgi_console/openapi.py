"""The wire formats in the OpenAPI description, taken from the published JSON Schemas.

The description is OpenAPI 3.1, whose schemas are JSON Schema 2020-12, so the RunTrace
and Guardrail schemas go in as they are, their `$defs` moved to components.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from typing import Any

from guardrails.engine.schema import CONSOLE_LIMITS_SCHEMA, GUARDRAIL_SCHEMA, RUNTRACE_SCHEMA

WIRE_SCHEMAS = {"RunTrace": RUNTRACE_SCHEMA, "GuardrailDocument": GUARDRAIL_SCHEMA,
                "GuardrailConsoleLimits": CONSOLE_LIMITS_SCHEMA}


def as_components(name: str, schema: Mapping[str, Any]) -> dict[str, Any]:
    """The schema and its `$defs` as components named `name` and `name` + def name."""
    text = json.dumps(schema)
    for definition in schema.get("$defs", {}):
        text = text.replace(f'"#/$defs/{definition}"', f'"#/components/schemas/{name}{definition}"')
    moved = json.loads(text)
    definitions = moved.pop("$defs", {})
    for key in ("$schema", "$id"):
        moved.pop(key, None)
    components = {name: moved}
    components.update({f"{name}{key}": value for key, value in definitions.items()})
    return components


def add_wire_schemas(result: dict[str, Any], generator: Any, request: Any, public: bool) -> Any:
    """drf-spectacular postprocessing hook: add the RunTrace and Guardrail components."""
    schemas = result.setdefault("components", {}).setdefault("schemas", {})
    for name, schema in WIRE_SCHEMAS.items():
        schemas.update(copy.deepcopy(as_components(name, schema)))
    return result


#: Text without NUL characters, which the console refuses everywhere (runtrace.md).
NO_NUL = "^[^\\x00]*$"


def refuse_nul_in_text_parameters(result: dict[str, Any], generator: Any, request: Any,
                             public: bool) -> Any:
    """drf-spectacular postprocessing hook: say that text parameters take no NUL."""
    for operations in result.get("paths", {}).values():
        for operation in operations.values():
            for parameter in operation.get("parameters", []):
                schema = parameter.get("schema", {})
                plain_text = schema.get("type") == "string" and not (
                    {"enum", "format", "pattern"} & schema.keys())
                if parameter.get("in") in ("query", "path") and plain_text:
                    schema["pattern"] = NO_NUL
    return result


def ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}
