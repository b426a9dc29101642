"""Reading the CI commands' files: guardrail documents and trace files (JSON or JSON Lines).

Trace files are read by the engine's streaming reader (guardrails/engine/trace_files.py),
the one uploads read with: gzip recognised by its magic bytes, JSON Lines line by line and
a JSON array element by element, each trace's size and depth checked before it is kept
or parsed. The reader hands over each trace's bytes, parsed where they are evaluated (in a
worker process under `--jobs`) with the reader's own checks.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import IO

import orjson

from guardrails.engine import environment
from guardrails.engine.schema import MAX_DEPTH
from guardrails.engine.trace_files import Limits, Parsed, UnreadableFile, decompressed, loads, raw_entries
from guardrails.engine.types import Issue


class BadInput(Exception):
    """A file that cannot be read or parsed: the message names it (and the line)."""


#: One trace of a file before evaluation: the line it starts on, and either its bytes
#: (parsed later, by `parse_entry`) or the Issue that kept it from being read.
Entry = tuple[int, bytes | None, object]


def _os_reason(exc: BaseException) -> str:
    return getattr(exc, "strerror", None) or str(exc)


def _open(path: str) -> IO[bytes]:
    try:
        return open(path, "rb")
    except OSError as exc:
        raise BadInput(f"{path}: cannot read: {_os_reason(exc)}") from exc


def _read_bytes(path: str) -> bytes:
    """The file's bytes, gunzipped when it starts with gzip's magic bytes."""
    with _open(path) as handle:
        try:
            return decompressed(handle, None).read()
        except (OSError, EOFError) as exc:
            raise BadInput(f"{path}: cannot read: {_os_reason(exc)}") from exc


def load_json_file(path: str) -> object:
    """One JSON document from a file (gzip-compressed or not)."""
    data = _read_bytes(path)
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise BadInput(f"{path}:{exc.lineno}: not valid JSON: {exc.msg}") from exc


def iter_entries(path: str, max_bytes: int, max_depth: int = MAX_DEPTH) -> Iterator[Entry]:
    """The entries of a trace file, in order, read as they are asked for; BadInput when the
    file cannot be read (then the entries before it have been given)."""
    limits = Limits(max_bytes, max_depth, None, _blank_lines())
    with _open(path) as handle:
        try:
            for line, text, error in raw_entries(handle, path, limits):
                yield line, text, None if error is None else Issue("", error)
        except UnreadableFile as exc:
            raise BadInput(f"{path}: {exc}") from exc
        except (OSError, EOFError) as exc:
            raise BadInput(f"{path}: cannot read: {_os_reason(exc)}") from exc


def _blank_lines() -> int:
    try:
        return environment.ENGINE.whole("KINDGI_UPLOAD_MAX_BLANK_LINES")
    except environment.BadValue as error:
        raise BadInput(str(error)) from None


def parse_entry(raw: bytes, max_depth: int) -> object | Issue:
    """A trace's bytes as the reader gave them: the trace, or an Issue saying why not."""
    parsed = loads(raw, Parsed(), max_depth)
    return Issue("", parsed.error) if parsed.error is not None else parsed.document
