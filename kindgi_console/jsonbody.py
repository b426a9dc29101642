"""Reading a JSON document sent to the console (a request body, an imported file), strictly.

orjson parses first: it is fast, and it refuses nesting deeper than 1,024 levels without
recursing in Python (the standard library's parser raises RecursionError on a 100,000-deep
array). orjson keeps the last of duplicate keys silently, so a second pass with the
standard library's `object_pairs_hook` refuses them: `{"id": "a", "id": "b"}` is not a
guardrail with id "b", it is a mistake.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import orjson
from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser


class JsonBodyError(ValueError):
    """The bytes are not one JSON document the console accepts; the message says why."""


class DuplicateKey(ValueError):
    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


def _refuse_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj = dict(pairs)
    if len(obj) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise DuplicateKey(key)
            seen.add(key)
    return obj


def parse_json(raw: bytes | str) -> Any:
    """The JSON value of `raw`; JsonBodyError if it is not JSON, nests too deep, or repeats
    a key in an object."""
    try:
        value = orjson.loads(raw)
    except orjson.JSONDecodeError as error:
        raise JsonBodyError(str(error)) from None
    if not isinstance(value, dict | list) or (b"{" not in raw if isinstance(raw, bytes) else "{" not in raw):
        return value
    try:
        json.loads(raw, object_pairs_hook=_refuse_duplicates)
    except DuplicateKey as duplicate:
        raise JsonBodyError(f"the key {duplicate.key!r} appears twice in one object") from None
    except RecursionError:
        raise JsonBodyError("the document nests too deeply") from None
    return value


class StrictJSONParser(JSONParser):
    """DRF's JSON parser with the console's rules: bounded depth, no duplicate keys."""

    def parse(self, stream: Any, media_type: str | None = None, parser_context: Mapping[str, Any] | None = None) -> Any:
        try:
            return parse_json(stream.read() if stream is not None else b"")
        except JsonBodyError as error:
            raise ParseError(f"the body is not valid JSON: {error}") from None
