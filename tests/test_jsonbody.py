"""The strict JSON reader: a repeated key is refused however the body is written, and the
colon count that spares the second parse never lets one through."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kindgi_console.jsonbody import JsonBodyError, parse_json


def refused(raw: bytes | str) -> str | None:
    try:
        parse_json(raw)
    except JsonBodyError as error:
        return str(error)
    return None


@pytest.mark.parametrize(
    "raw",
    [
        b'{"a": 1, "a": 2}',
        b'[{"a": 1}, {"a": 1, "a": 1}]',
        # A repeat whose count an escaped colon elsewhere would make up for.
        b'{"a": 1, "a": 2, "b": "\\u003a"}',
        b'{"a": 1, "a": 2, "b": "\\u003A"}',
        # The dropped value held colons of its own.
        b'{"a": {"x": "1:2"}, "a": 3}',
        '{"é": "x:y", "é": 1}'.encode(),
        '{"k": 1, "k": 2}',
        # Deeper than orjson writes: the count cannot be made, the parser looks.
        b'{"a":' * 300 + b'{"b": 1, "b": 2}' + b"}" * 300,
    ],
)
def test_a_repeated_key_is_refused(raw: bytes | str) -> None:
    assert refused(raw) is not None and "appears twice" in str(refused(raw))


@pytest.mark.parametrize(
    "raw",
    [
        b'[{"k:": 1}, {"k:": 2}]',
        b'{"a": "::", "b": [1, {"c": ":"}]}',
        b'{"a": "\\u003a"}',
        b'{ "a" : 1 , "b" : { "a" : 2 } }',
        '{"é": "x:y"}',
        b'{"a":' * 300 + b"1" + b"}" * 300,
    ],
)
def test_unique_keys_are_read_whatever_their_colons(raw: bytes | str) -> None:
    assert refused(raw) is None
    assert parse_json(raw) == json.loads(raw)


def test_a_body_of_unique_keys_is_parsed_once(monkeypatch: Any) -> None:
    """The second parse is the cost this saves on every ingested batch."""
    calls: list[object] = []
    monkeypatch.setattr(json, "loads", lambda *a, **k: calls.append(a))
    traces = [{"id": f"t-{n}", "input": "a: b", "messages": [{"role": "user"}]} for n in range(50)]
    body = json.dumps({"traces": traces})
    parse_json(body.encode())
    assert calls == []
    parse_json(b'{"a": "\\u003a"}')
    assert len(calls) == 1


keys = st.sampled_from(["a", "b", "a:", ":", "é", "c\u003a"])
scalars = st.one_of(st.none(), st.booleans(), st.integers(-(2**53), 2**53), st.text(alphabet=':ab\\"é', max_size=4))
values = st.recursive(
    scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.lists(st.tuples(keys, inner), max_size=4)),
    max_leaves=12,
)


def written(value: Any, escape: bool) -> str:
    """`value` as JSON text, a list of pairs written as an object (its keys may repeat),
    colons inside strings written as escapes when `escape`."""
    if isinstance(value, tuple):
        value = list(value)
    if isinstance(value, list) and value and all(isinstance(pair, tuple) for pair in value):
        return "{" + ", ".join(f"{written(key, escape)}: {written(item, escape)}" for key, item in value) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(written(item, escape) for item in value) + "]"
    text = json.dumps(value, ensure_ascii=False)
    return text.replace(":", "\\u003a") if escape and isinstance(value, str) else text


def repeats(value: Any) -> bool:
    if isinstance(value, list) and value and all(isinstance(pair, tuple) for pair in value):
        names = [key for key, _ in value]
        return len(set(names)) != len(names) or any(repeats(item) for _, item in value)
    return isinstance(value, list) and any(repeats(item) for item in value)


@settings(max_examples=400, deadline=None)
@given(values, st.booleans())
def test_the_reader_refuses_exactly_the_bodies_with_a_repeated_key(value: Any, escape: bool) -> None:
    raw = written(value, escape).encode()
    assert (refused(raw) is not None) == repeats(value), raw
