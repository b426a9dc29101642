"""The wire formats in the OpenAPI description, taken from the published JSON Schemas.

The description is OpenAPI 3.1, whose schemas are JSON Schema 2020-12, so the RunTrace
and Guardrail schemas go in as they are, their `$defs` moved to components.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from typing import Any

from drf_spectacular.utils import OpenApiResponse

from guardrails.engine.schema import CONSOLE_LIMITS_SCHEMA, GUARDRAIL_SCHEMA, RUNTRACE_SCHEMA

WIRE_SCHEMAS = {
    "RunTrace": RUNTRACE_SCHEMA,
    "GuardrailDocument": GUARDRAIL_SCHEMA,
    "GuardrailConsoleLimits": CONSOLE_LIMITS_SCHEMA,
}

#: The API's one error shape (kindgi_console.api.exception_handler): every 4xx answer is
#: `{"errors": [{path, message}]}`; the `Errors` component of the description, too.
ERRORS_SCHEMA = {
    "type": "object",
    "required": ["errors"],
    "properties": {
        "errors": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["path", "message"],
                "properties": {
                    "path": {"type": "string", "description": "JSON pointer of the field"},
                    "message": {"type": "string"},
                },
            },
        }
    },
}


def error_responses(*codes: int) -> dict[int, OpenApiResponse]:
    """The OpenAPI responses of `codes`, each in the error shape."""
    return {code: OpenApiResponse(ERRORS_SCHEMA) for code in codes}


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


def refuse_nul_in_text_parameters(result: dict[str, Any], generator: Any, request: Any, public: bool) -> Any:
    """drf-spectacular postprocessing hook: say that text parameters take no NUL."""
    for operations in result.get("paths", {}).values():
        for operation in operations.values():
            for parameter in operation.get("parameters", []):
                schema = parameter.get("schema", {})
                plain_text = schema.get("type") == "string" and not ({"enum", "format", "pattern"} & schema.keys())
                if parameter.get("in") in ("query", "path") and plain_text:
                    schema["pattern"] = NO_NUL
    return result


def ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


def filter_parameters(filterset_class: Any) -> list[Any]:
    """The query parameters of a django-filter FilterSet, for views whose answer is not a
    list (drf-spectacular describes a FilterSet's parameters for list views only)."""
    import django_filters
    from drf_spectacular.types import OpenApiTypes
    from drf_spectacular.utils import OpenApiParameter

    parameters = []
    for name, field in filterset_class.base_filters.items():
        kind: Any = str
        enum = None
        if isinstance(field, django_filters.IsoDateTimeFilter):
            kind = OpenApiTypes.DATETIME
        elif isinstance(field, django_filters.ChoiceFilter):
            enum = [value for value, _ in field.extra["choices"]]
        description = str(field.extra.get("help_text") or f"Only the rows of this {name}.")
        parameters.append(OpenApiParameter(name, kind, enum=enum, description=description))
    return parameters


_COMMON_ERRORS = {
    "400": "A parameter or the body is invalid: each error names its field.",
    "401": "No credentials, or an unknown or revoked key.",
    "403": "The caller lacks the scope or permission.",
    "429": "Too many requests from this caller: retry later.",
    "503": "The database is unavailable: retry after Retry-After seconds.",
}
_BODY_ERRORS = {"413": "The body is over the size limit.", "415": "The body is not application/json."}


def add_common_error_responses(result: dict[str, Any], generator: Any, request: Any, public: bool) -> Any:
    """drf-spectacular postprocessing hook: the errors any authenticated operation may
    answer (the base view's authentication, permissions, throttle, parser and the
    database), each in the one error shape; 404 where the path names an object."""
    schemas = result.setdefault("components", {}).setdefault("schemas", {})
    schemas.setdefault("Errors", ERRORS_SCHEMA)
    errors = {"application/json": {"schema": ref("Errors")}}
    for path, operations in result.get("paths", {}).items():
        for method, operation in operations.items():
            if not isinstance(operation, dict) or "responses" not in operation:
                continue
            if operation.get("security") == [{}] or path.startswith("/api/v1/schemas/"):
                continue  # public: no credentials to refuse
            wanted = dict(_COMMON_ERRORS)
            if method in ("post", "put", "patch"):
                wanted.update(_BODY_ERRORS)
            if "{" in path:
                wanted["404"] = "No such object among those the caller may see."
            for code, description in wanted.items():
                operation["responses"].setdefault(code, {"description": description, "content": errors})
    return result
