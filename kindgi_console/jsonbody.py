"""Reading a JSON document sent to the console (a request body, an imported file), strictly.

orjson parses first: it is fast, and it refuses nesting deeper than 1,024 levels without
recursing in Python (the standard library's parser raises RecursionError on a 100,000-deep
array). orjson keeps the last of duplicate keys silently: `{"id": "a", "id": "b"}` is not a
guardrail with id "b", it is a mistake, and it is refused.

Telling a repeated key costs a second look at the bytes, and on the ingestion path (a batch
of 1,000 traces is some 40,000 objects) the standard library's parser with an
`object_pairs_hook` took as long as the rest of the request. So the colons are counted
first: outside strings a colon follows each key, and inside a string it stands for itself,
so the body holds at least as many colons as orjson's compact form of what it parsed, and
exactly as many unless a key was dropped (a repeat, with its value) or a string wrote a colon
as an escape (`\\u003a`). Equal counts with no such escape prove every key unique; anything
else goes to the parser with the hook, which names the key.
"""

from __future__ import annotations

import json
import re
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
    if _keys_unique_by_count(raw, value):
        return value
    try:
        json.loads(raw, object_pairs_hook=_refuse_duplicates)
    except DuplicateKey as duplicate:
        raise JsonBodyError(f"the key {duplicate.key!r} appears twice in one object") from None
    except RecursionError:
        raise JsonBodyError("the document nests too deeply") from None
    return value


ESCAPED_COLON = re.compile(rb"\\u003a", re.IGNORECASE)


def _keys_unique_by_count(raw: bytes | str, value: Any) -> bool:
    """Whether the colons prove that no object of `raw` repeats a key (see the module's
    note); False when they cannot tell, and the caller looks with the parser."""
    data = raw.encode() if isinstance(raw, str) else raw
    if ESCAPED_COLON.search(data):
        return False
    try:
        compact = orjson.dumps(value)
    except orjson.JSONEncodeError:  # deeper than orjson writes (255 levels)
        return False
    return data.count(b":") == compact.count(b":")


class StrictJSONParser(JSONParser):
    """DRF's JSON parser with the console's rules: bounded depth, no duplicate keys."""

    def parse(self, stream: Any, media_type: str | None = None, parser_context: Mapping[str, Any] | None = None) -> Any:
        try:
            return parse_json(stream.read() if stream is not None else b"")
        except JsonBodyError as error:
            raise ParseError(f"the body is not valid JSON: {error}") from None
