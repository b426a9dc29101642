"""Reading a trace file in the tests: each trace parsed, with the line it starts on."""

from __future__ import annotations

from collections.abc import Iterator

from guardrails.engine.cli.files import iter_entries, parse_entry
from guardrails.engine.schema import MAX_DEPTH, MAX_TRACE_BYTES
from guardrails.engine.types import Issue


def iter_trace_file(path: str) -> Iterator[tuple[int, object | Issue]]:
    """Each trace of a file with the line it starts on, or an Issue for one that cannot be read
    (the CLI's reader, iter_entries, with each entry parsed as a batch parses it)."""
    for line, raw, item in iter_entries(path, MAX_TRACE_BYTES):
        yield line, parse_entry(raw, MAX_DEPTH) if raw is not None else item
