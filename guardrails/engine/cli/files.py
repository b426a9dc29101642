"""Reading the CI commands' files: guardrail documents and trace files (JSON or JSON Lines).

A JSON Lines file (`.jsonl`, `.ndjson`, optionally `.gz`) is streamed: its lines are read as
raw bytes and parsed where they are evaluated (in a worker process under `--jobs`). A JSON
file holds one trace or an array of them and is read whole.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import IO, TYPE_CHECKING

import orjson

from guardrails.engine.types import Issue

if TYPE_CHECKING:  # gzip is imported for .gz files only
    import gzip


class BadInput(Exception):
    """A file that cannot be read or parsed: the message names it (and the line)."""


#: One trace of a file before evaluation: its line, and either its raw JSON Lines text
#: (parsed later) or, for a JSON file, the parsed trace or an Issue.
Entry = tuple[int, bytes | None, object]

BLANK = object()  # a blank line of a JSON Lines file: skipped


def _os_reason(exc: BaseException) -> str:
    return getattr(exc, "strerror", None) or str(exc)


def _read_bytes(path: str) -> bytes:
    try:
        if path.endswith(".gz"):
            import gzip

            with gzip.open(path, "rb") as handle:
                return handle.read()
        return Path(path).read_bytes()
    except (OSError, EOFError) as exc:
        raise BadInput(f"{path}: cannot read: {_os_reason(exc)}") from exc


def load_json_file(path: str) -> object:
    """One JSON document from a file (gzip-compressed when it ends in .gz)."""
    data = _read_bytes(path)
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise BadInput(f"{path}:{exc.lineno}: not valid JSON: {exc.msg}") from exc


def is_jsonl(path: str) -> bool:
    name = path[:-3] if path.endswith(".gz") else path
    return name.endswith((".jsonl", ".ndjson"))


def iter_trace_file(path: str) -> Iterator[tuple[int, object | Issue]]:
    """Each trace of a file with its line number, or an Issue for a line that is not JSON.

    JSON Lines files are streamed line by line (a blank line gives BLANK); a JSON file
    holds one trace or an array of them. An unreadable file raises BadInput.
    """
    from guardrails.engine.schema import MAX_TRACE_BYTES

    for line, raw, item in iter_entries(path, MAX_TRACE_BYTES):
        yield line, parse_line(raw, MAX_TRACE_BYTES) if raw is not None else item


def iter_entries(path: str, max_bytes: int) -> Iterator[Entry]:
    """The entries of a trace file, in order; BadInput when it cannot be read."""
    if is_jsonl(path):
        yield from _iter_jsonl(path)
    else:
        yield from _iter_json(path, max_bytes)


def _open_lines(path: str) -> IO[bytes] | gzip.GzipFile:
    try:
        if path.endswith(".gz"):
            import gzip

            return gzip.open(path, "rb")
        return open(path, "rb")
    except OSError as exc:
        raise BadInput(f"{path}: cannot read: {_os_reason(exc)}") from exc


def _iter_jsonl(path: str) -> Iterator[Entry]:
    with _open_lines(path) as handle:
        try:
            for number, raw in enumerate(handle, start=1):
                yield number, raw, None
        except (OSError, EOFError) as exc:
            raise BadInput(f"{path}: cannot read: {_os_reason(exc)}") from exc


def parse_line(raw: bytes, max_bytes: int) -> object | Issue:
    """A JSON Lines line: the trace, an Issue, or BLANK."""
    if len(raw) > max_bytes:
        return Issue("", f"trace is larger than {max_bytes} bytes")
    if not raw.strip():
        return BLANK
    try:
        doc: object = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        return Issue("", f"not valid JSON: {exc.msg}")
    return doc


def _iter_json(path: str, max_bytes: int) -> Iterator[Entry]:
    data = _read_bytes(path)
    try:
        doc = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        yield exc.lineno, None, Issue("", f"not valid JSON: {exc.msg}")
        return
    items = doc if isinstance(doc, list) else [doc]
    lines = _item_lines(data, len(items)) if isinstance(doc, list) else [1]
    for index, item in enumerate(items):
        if len(orjson.dumps(item)) > max_bytes:
            yield lines[index], None, Issue(f"/{index}", f"trace is larger than {max_bytes} bytes")
        else:
            yield lines[index], None, item


# A JSON string, a structural character, a newline, or a literal (number, true, null).
_JSON_TOKEN = re.compile(rb'"(?:[^"\\\n]|\\.)*"|[\[\]{},\n]|[^\s\[\]{},"]+')


def _item_lines(data: bytes, count: int) -> list[int]:
    """The line on which each element of a top-level JSON array starts."""
    lines: list[int] = []
    depth, line, expecting = 0, 1, False
    for token in _JSON_TOKEN.finditer(data):
        first = token.group()[:1]
        if first == b"\n":
            line += 1
            continue
        if depth == 1 and expecting and first not in (b"]", b","):
            lines.append(line)
            expecting = False
        if first in (b"[", b"{"):
            depth += 1
            expecting = depth == 1
        elif first in (b"]", b"}"):
            depth -= 1
        elif first == b"," and depth == 1:
            expecting = True
    return (lines + [line] * count)[:count]
