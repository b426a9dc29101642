"""The trace-file reader (guardrails/engine/trace_files.py) with the console's settings as its
limits: what uploads read their files with."""

from __future__ import annotations

from collections.abc import Iterator
from typing import IO

from django.conf import settings

from guardrails.engine.trace_files import Limits, Parsed, Position, UnreadableFile
from guardrails.engine.trace_files import parse_file as parse_with_limits

__all__ = ["Limits", "Parsed", "Position", "UnreadableFile", "limits", "parse_file"]


def limits() -> Limits:
    """The settings' bounds on a trace file, read when a file is read (tests change them)."""
    return Limits(
        max_trace_bytes=settings.KINDGI_MAX_TRACE_BYTES,
        max_depth=settings.KINDGI_MAX_DEPTH,
        max_decompressed=settings.KINDGI_UPLOAD_MAX_BYTES_DECOMPRESSED,
        max_blank_lines=settings.KINDGI_UPLOAD_MAX_BLANK_LINES,
    )


def parse_file(raw: IO[bytes], name: str, start: Position | None = None) -> Iterator[Parsed]:
    """Every trace of an uploaded file from `start` on, within the settings' limits."""
    return parse_with_limits(raw, name, limits(), start)
