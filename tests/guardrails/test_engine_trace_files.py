"""The one trace-file reader (guardrails/engine/trace_files.py), as the CI command uses it:
a JSON array is split as it streams by, each element with the line it starts on."""

from __future__ import annotations

import gzip
import io
import json
from pathlib import Path

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from guardrails.engine import trace_files
from guardrails.engine.cli.files import BadInput
from guardrails.engine.trace_files import READ_SIZE, Limits, UnreadableFile, parse_file
from guardrails.engine.types import Issue
from tests.guardrails.tracefiles import iter_trace_file

LIMITS = Limits(max_trace_bytes=4096, max_depth=8, max_decompressed=None, max_blank_lines=10)


def read(data: bytes, name: str = "t.json", limits: Limits = LIMITS) -> list[tuple[int | None, object, str | None]]:
    return [(p.item, p.document, p.error) for p in parse_file(io.BytesIO(data), name, limits)]


def test_an_arrays_elements_come_with_the_line_they_start_on() -> None:
    data = b'[\n  {"id": "a"},\n\n  {"id": "b",\n   "x": 1}, 3\n]\n'
    parsed = list(parse_file(io.BytesIO(data), "t.json", LIMITS))
    assert [(p.item, p.first_line, p.document) for p in parsed] == [
        (1, 2, {"id": "a"}),
        (2, 4, {"id": "b", "x": 1}),
        (3, 5, 3),
    ]


def test_brackets_commas_and_quotes_inside_strings_do_not_split_an_element() -> None:
    tricky = {"id": "a", "s": '],[{"x": 1}, \\" \\\\', "t": "\\\\"}
    assert read(orjson.dumps([tricky, {"id": "b"}])) == [(1, tricky, None), (2, {"id": "b"}, None)]


def test_elements_that_cross_the_read_size_are_read_whole() -> None:
    documents = [{"id": f"t-{n}", "text": "x" * 700 + '"],{' * 3} for n in range(400)]
    data = json.dumps(documents, indent=1).encode()
    assert len(data) > 3 * READ_SIZE
    limits = Limits(max_trace_bytes=4096, max_depth=8, max_decompressed=None, max_blank_lines=10)
    assert [document for _, document, _ in read(data, limits=limits)] == documents


def test_an_array_is_read_as_it_is_asked_for_not_whole() -> None:
    data = orjson.dumps([{"id": f"t-{n}", "pad": "y" * 1000} for n in range(2000)])
    stream = io.BytesIO(data)
    first = next(parse_file(stream, "t.json", LIMITS))
    assert first.document["id"] == "t-0" and stream.tell() < len(data) // 10


def test_an_empty_array_has_no_traces_and_a_missing_element_breaks_it() -> None:
    assert read(b" [ ] ") == []
    rows = read(b'[{"id": "a"}, ]')
    assert rows[0] == (1, {"id": "a"}, None)
    assert rows[1][0] == 2 and rows[1][2].startswith("not valid JSON from here on (an element is missing)")


def test_an_element_that_is_not_json_is_one_bad_trace() -> None:
    rows = read(b'[{"id": "a"}, {"id": x}, {"id": "c"}]')
    assert [(item, error is None) for item, _, error in rows] == [(1, True), (2, False), (3, True)]
    assert rows[1][2].startswith("not valid JSON (")


def test_an_array_too_deep_or_an_element_far_too_big_refuses_the_file() -> None:
    with pytest.raises(UnreadableFile, match="element 2 is nested deeper than 8 levels"):
        read(b'[{"id": "a"}, ' + b"[" * 50 + b"]" * 50 + b"]")
    huge = orjson.dumps({"id": "big", "x": "z" * (2 * READ_SIZE + 300_000)})
    with pytest.raises(UnreadableFile, match="element 1 is over the limit of 4096 bytes"):
        read(b"[" + huge + b"]")


def test_the_cli_reads_gzip_by_its_magic_bytes_whatever_the_name(tmp_path: Path) -> None:
    packed = tmp_path / "traces.jsonl"
    packed.write_bytes(gzip.compress(b'{"id": "a"}\n{"id": "b"}\n'))
    plain = tmp_path / "traces.json.gz"
    plain.write_bytes(b'[{"id": "c"}]')
    assert list(iter_trace_file(str(packed))) == [(1, {"id": "a"}), (2, {"id": "b"})]
    assert list(iter_trace_file(str(plain))) == [(1, {"id": "c"})]


def test_the_cli_names_the_line_of_a_bad_element_and_refuses_a_broken_file(tmp_path: Path) -> None:
    path = tmp_path / "t.json"
    path.write_text('[\n{"id": "a"},\n{"id": \n')
    rows = list(iter_trace_file(str(path)))
    assert rows[0] == (2, {"id": "a"})
    assert rows[1][0] == 3 and isinstance(rows[1][1], Issue) and "not valid JSON" in rows[1][1].message
    deep = tmp_path / "deep.jsonl"
    deep.write_text('{"id": "a"}\n' + "\n" * 10_001 + '{"id": "b"}\n')
    with pytest.raises(BadInput, match="more than 10000 blank lines"):
        list(iter_trace_file(str(deep)))


_JSON_TEXT = st.text(alphabet=st.sampled_from(list('ab ,:[]{}"\\\n\t/é€\U0001f600')), max_size=12)
_JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-(10**6), 10**6) | _JSON_TEXT,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(_JSON_TEXT, children, max_size=4),
    max_leaves=20,
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    documents=st.lists(_JSON_VALUES, max_size=8),
    indent=st.sampled_from([None, 0, 2]),
    read_size=st.sampled_from([1, 2, 7, 64, READ_SIZE]),
    span=st.sampled_from([1, 3, 16, 8192]),
)
def test_the_split_gives_back_every_element_whatever_the_read_size_and_span(
    monkeypatch: pytest.MonkeyPatch, documents: list[object], indent: int | None, read_size: int, span: int
) -> None:
    """Brackets, commas, quotes and backslashes inside strings, elements crossing each read
    and each span of the pass inside an element: the elements are the array's, in order."""
    monkeypatch.setattr(trace_files, "READ_SIZE", read_size)
    monkeypatch.setattr(trace_files, "INSIDE_SPAN", span)
    data = json.dumps(documents, indent=indent, ensure_ascii=False).encode()
    limits = Limits(max_trace_bytes=1 << 20, max_depth=64, max_decompressed=None, max_blank_lines=10)
    parsed = read(data, limits=limits)
    assert parsed == [(number, document, None) for number, document in enumerate(documents, 1)]
