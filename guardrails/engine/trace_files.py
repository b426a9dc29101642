"""Reading trace files in bounded memory, depth and size, from any point already read.

A file is JSON (one RunTrace, or an array of them) or JSON Lines (one RunTrace a line,
blank lines skipped), either of them possibly gzip-compressed (recognised by its magic
bytes, whatever its name). Every bound holds before anything is built:

- the decompressed bytes are counted as they are read, and a file that expands past
  `KINDGI_UPLOAD_MAX_BYTES_DECOMPRESSED` is refused (a few KB of gzip can hold GBs);
- a line is read up to `KINDGI_MAX_TRACE_BYTES` and its nesting is measured on its bytes
  before it is parsed; a run of more than `KINDGI_UPLOAD_MAX_BLANK_LINES` blank lines
  refuses the file;
- an array is read event by event (ijson's `basic_parse`, which keeps no path of its own),
  depth counted on every opening bracket; one element deeper than `KINDGI_MAX_DEPTH`
  refuses the file, so no element is ever built deeper than the limit.

Reading can start where an earlier reader stopped (`Position`): JSON Lines at a byte
offset of the decompressed text (gzip is decompressed again up to it, never stored), an
array after a number of elements (skipped without being built).
"""

from __future__ import annotations

import gzip
import io
import re
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import IO, Any

import ijson
import orjson
from django.conf import settings
from ijson.common import ObjectBuilder

GZIP_MAGIC = b"\x1f\x8b"
OPENING = frozenset({"start_map", "start_array"})
CLOSING = frozenset({"end_map", "end_array"})
STRING = re.compile(rb'"(?:[^"\\]|\\.)*"', re.DOTALL)
NOT_A_BRACKET = bytes(set(range(256)) - set(b"[]{}"))
SKIP_CHUNK = 1024 * 1024


class UnreadableFile(Exception):
    """The file as a whole cannot be read (corrupt compression, not JSON, too big or too deep)."""


@dataclass
class Parsed:
    """One trace of a file, or why it could not be read. `line` for JSON Lines (1-based),
    `item` for the elements of a JSON array (1-based); `offset`, for JSON Lines, is the
    decompressed bytes read up to the end of its line."""

    line: int | None = None
    item: int | None = None
    document: Any = None
    error: str | None = None
    offset: int = 0

    @property
    def where(self) -> dict[str, int | None]:
        return {"line": self.line, "item": self.item}

    @property
    def position(self) -> Position:
        """Where a reader resumes after this trace."""
        return Position(offset=self.offset, count=self.line or self.item or 0)


@dataclass(frozen=True)
class Position:
    """How far a file was read: decompressed bytes and lines (JSON Lines), or elements (an array)."""

    offset: int = 0
    count: int = 0


class LimitedReader(io.RawIOBase):
    """The decompressed bytes of a file, refused once more than `limit` have been read, or
    once one element of an array (`element`) spans more than `element_limit` bytes."""

    #: What the readers ahead of the parser (this stream's buffer, the parser's) may hold.
    READ_AHEAD = 256 * 1024

    def __init__(self, inner: IO[bytes], limit: int) -> None:
        super().__init__()
        self.inner = inner
        self.limit = limit
        self.count = 0
        self.element: tuple[int, int] | None = None  # (its number, the count where it began)
        self.element_limit = settings.KINDGI_MAX_TRACE_BYTES + self.READ_AHEAD

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        data = self.inner.read(len(buffer))
        self.count += len(data)
        if self.count > self.limit:
            raise UnreadableFile(f"the file expands to more than {self.limit} bytes, the limit "
                                 "(KINDGI_UPLOAD_MAX_BYTES_DECOMPRESSED): the rest of the file is not read")
        if self.element is not None and self.count - self.element[1] > self.element_limit:
            raise UnreadableFile(f"element {self.element[0]} is over the limit of "
                                 f"{settings.KINDGI_MAX_TRACE_BYTES} bytes: the rest of the file is not read")
        buffer[: len(data)] = data
        return len(data)


def decompressed(raw: IO[bytes]) -> io.BufferedReader:
    """The file's bytes, gunzipped when it starts with the gzip magic bytes, size-limited.

    The caller keeps `raw` open (and closes it) for as long as it reads.
    """
    head = raw.read(2)
    raw.seek(0)
    inner: IO[bytes] = gzip.GzipFile(fileobj=raw, mode="rb") if head == GZIP_MAGIC else raw
    limited = LimitedReader(inner, settings.KINDGI_UPLOAD_MAX_BYTES_DECOMPRESSED)
    return io.BufferedReader(limited, buffer_size=64 * 1024)


def file_format(name: str, stream: io.BufferedReader) -> str:
    """`jsonl` or `json`: by the name, else by the first character that is not blank."""
    base = name.lower().removesuffix(".gz")
    if base.endswith((".jsonl", ".ndjson")):
        return "jsonl"
    if base.endswith(".json"):
        return "json"
    return "json" if _first_byte(stream) == b"[" else "jsonl"


def _first_byte(stream: io.BufferedReader) -> bytes:
    peeked = stream.peek(4096).lstrip()
    return peeked[:1]


def parse_file(raw: IO[bytes], name: str, start: Position | None = None) -> Iterator[Parsed]:
    """Every trace of the file from `start` on, each one parsed or with the reason it was not."""
    return parse_stream(decompressed(raw), name, start or Position())


def parse_stream(stream: io.BufferedReader, name: str, start: Position) -> Iterator[Parsed]:
    """As `parse_file`, from the decompressed stream (which the caller keeps open)."""
    try:
        if file_format(name, stream) == "jsonl":
            yield from parse_lines(stream, start)
        else:
            yield from parse_json(stream, start)
    except (OSError, EOFError, zlib.error) as error:
        raise UnreadableFile(f"the file cannot be read: {error}") from error


# ---------------------------------------------------------------------------- JSON Lines


def parse_lines(stream: IO[bytes], start: Position) -> Iterator[Parsed]:
    """JSON Lines: one trace a line; a line over the trace limit is refused without being kept."""
    limit = settings.KINDGI_MAX_TRACE_BYTES
    offset, number, blank_run = start.offset, start.count, 0
    _skip_bytes(stream, offset)
    while line := stream.readline(limit + 1):
        offset += len(line)
        number += 1
        if len(line) > limit and not line.endswith(b"\n"):
            offset += _skip_rest_of_line(stream)
            yield Parsed(line=number, offset=offset, error=f"the line is over the limit of {limit} bytes")
        elif line.strip():
            blank_run = 0
            yield loads(line, Parsed(line=number, offset=offset))
        else:
            blank_run += 1
            _refuse_long_blank_run(blank_run, number)


def _refuse_long_blank_run(blank_run: int, number: int) -> None:
    bound = settings.KINDGI_UPLOAD_MAX_BLANK_LINES
    if blank_run > bound:
        raise UnreadableFile(f"more than {bound} blank lines in a row (up to line {number}): "
                             "the rest of the file is not read")


def _skip_bytes(stream: IO[bytes], count: int) -> None:
    """Read past what an earlier reader already read (gzip has to be decompressed again)."""
    while count > 0:
        piece = stream.read(min(count, SKIP_CHUNK))
        if not piece:
            raise UnreadableFile("the file is shorter than what was already read from it")
        count -= len(piece)


def _skip_rest_of_line(stream: IO[bytes]) -> int:
    skipped = 0
    while True:
        piece = stream.readline(64 * 1024)
        skipped += len(piece)
        if not piece or piece.endswith(b"\n"):
            return skipped


def loads(text: bytes, parsed: Parsed) -> Parsed:
    """Parse one trace's bytes, refusing them unparsed when they nest deeper than the limit."""
    max_depth = settings.KINDGI_MAX_DEPTH
    if nested_deeper_than(text, max_depth):
        parsed.error = f"is nested deeper than {max_depth} levels"
        return parsed
    try:
        parsed.document = orjson.loads(text)
    except orjson.JSONDecodeError as error:
        parsed.error = f"not valid JSON ({error.msg} {_where(text, error)})"
    return parsed


def _where(text: bytes, error: orjson.JSONDecodeError) -> str:
    """Where in the line (or the file, for a multi-line document) the JSON broke off."""
    body = text.rstrip()
    if b"\n" in body:
        return f"at line {error.lineno}, column {error.colno}"
    return "at the end of the line" if error.pos >= len(body) else f"at column {error.pos + 1}"


def nested_deeper_than(text: bytes, max_depth: int) -> bool:
    """Whether the JSON text's brackets (outside strings) nest deeper than `max_depth`.

    Too few brackets to be too deep is the common case, decided with two counts; else the
    strings are removed and the brackets walked.
    """
    if text.count(b"[") + text.count(b"{") <= max_depth:
        return False
    depth = 0
    for byte in STRING.sub(b"", text).translate(None, NOT_A_BRACKET):
        depth += 1 if byte in b"[{" else -1
        if depth > max_depth:
            return True
    return False


# ---------------------------------------------------------------------------- JSON


def parse_json(stream: io.BufferedReader, start: Position) -> Iterator[Parsed]:
    """A JSON file: an array read one element at a time, or a single trace."""
    if _first_byte(stream) == b"[":
        yield from parse_array(stream, start.count)
        return
    if start.count:
        return  # the single trace was read already
    text = stream.read(settings.KINDGI_MAX_TRACE_BYTES + 1)
    if len(text) > settings.KINDGI_MAX_TRACE_BYTES:
        yield Parsed(line=1, error=f"a single trace over the limit of {settings.KINDGI_MAX_TRACE_BYTES} bytes")
        return
    yield loads(text, Parsed(line=1, offset=len(text)))


def parse_array(stream: IO[bytes], skip: int = 0) -> Iterator[Parsed]:
    """The elements of a JSON array after the first `skip`, which are parsed but not built."""
    meter = getattr(stream, "raw", None)
    reader = ArrayReader(skip, meter if isinstance(meter, LimitedReader) else None)
    return reader.elements(ijson.basic_parse(stream, use_float=True))


class ArrayReader:
    """Builds an array's elements from the parser's events, depth counted on each opening
    bracket (the array itself is depth 1, an element's top 2), nothing built past the limit.

    The parser holds a whole token (a string, say) before it says anything of it, so an
    element's size is watched where the bytes are read (`meter`), not on its events.
    """

    def __init__(self, skip: int, meter: LimitedReader | None) -> None:
        self.skip = skip
        self.meter = meter
        self.limit = settings.KINDGI_MAX_DEPTH + 1
        self.depth = 0
        self.number = 0  # elements begun
        self.builder: ObjectBuilder | None = None

    def elements(self, events: Iterator[tuple[str, Any]]) -> Iterator[Parsed]:
        try:
            for event, value in events:
                if self._is_the_arrays_own(event):
                    if self.depth == 0:
                        return
                    continue
                parsed = self._feed(event, value)
                if parsed is not None:
                    yield parsed
        except ijson.JSONError as error:
            broken = self.number if self.builder is not None else self.number + 1
            if broken > self.skip:  # else the reader that read up to there reported it
                yield Parsed(item=broken, error=f"not valid JSON from here on ({error}): the rest "
                                                "of the file is not read")

    def _is_the_arrays_own(self, event: str) -> bool:
        """Count the depth; whether the event opens or closes the array itself."""
        if event in OPENING:
            self.depth += 1
            if self.depth > self.limit:
                raise UnreadableFile(f"element {self.number} is nested deeper than {self.limit - 1} levels "
                                     "(KINDGI_MAX_DEPTH): the rest of the file is not read")
            if self.depth == 1:
                self._watch_from(1)
                return True
        elif event in CLOSING:
            self.depth -= 1
            return self.depth == 0
        return False

    def _feed(self, event: str, value: Any) -> Parsed | None:
        """Give the event to the element being built; the element, once it is whole."""
        if self.builder is None:
            self.number += 1
            self.builder = ObjectBuilder() if self.number > self.skip else _SKIPPING
        if self.builder is not _SKIPPING:
            self.builder.event(event, value)
        if self.depth > 1:
            return None
        built, self.builder = self.builder, None
        self._watch_from(self.number + 1)
        return None if built is _SKIPPING else Parsed(item=self.number, document=built.value)

    def _watch_from(self, number: int) -> None:
        if self.meter is not None:
            self.meter.element = (number, self.meter.count)


_SKIPPING = ObjectBuilder()  # stands for an element skipped without being built
