"""JSON Schema validation with JSON-pointer issues, for the judge's own schemas."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from jsonschema import Draft202012Validator  # type: ignore[import-untyped]

from ..types import Issue


def pointer(base: str, parts: Iterable[object]) -> str:
    """The JSON pointer of `parts` (a jsonschema error path) under `base`."""
    tokens = [str(part).replace("~", "~0").replace("/", "~1") for part in parts]
    return base + "".join("/" + token for token in tokens)


def schema_issues(schema: Mapping[str, Any], doc: object, *, base_path: str = "") -> list[Issue]:
    """Every error of `doc` against the 2020-12 `schema`, each with the pointer of its field."""
    validator = Draft202012Validator(schema, format_checker=Draft202012Validator.FORMAT_CHECKER)
    errors = sorted(validator.iter_errors(doc), key=lambda error: list(map(str, error.path)))
    return [Issue(pointer(base_path, error.absolute_path), error.message) for error in errors]
