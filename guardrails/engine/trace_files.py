"""Reading trace files in bounded memory, depth and size, from any point already read.

The one reader of trace files: uploads (traces/ingest/uploads.py, with the console's settings as
its limits) and the CI command (guardrails/engine/cli/, with the same variables read from
the environment) both read through it. No Django import.

A file is JSON (one RunTrace, or an array of them) or JSON Lines (one RunTrace a line,
blank lines skipped), either of them possibly gzip-compressed (recognised by its magic
bytes, whatever its name). Every bound holds before anything is built:

- the decompressed bytes are counted as they are read, and a file that expands past
  `Limits.max_decompressed` is refused (a few KB of gzip can hold GBs);
- a line is read up to `Limits.max_trace_bytes` and its nesting is measured on its bytes
  before it is parsed; a run of more than `Limits.max_blank_lines` blank lines refuses the
  file;
- an array is split into its elements as its bytes stream by (`ArraySplitter`), depth
  counted on every opening bracket outside strings and each element's bytes counted: one
  element deeper than `Limits.max_depth` or far over the trace limit refuses the file, so
  no element is ever kept whole past the limits, and none is built before it is measured.

Each trace comes as a `Parsed`: its document, or the reason it could not be read, or (with
`parse=False`, for a caller that parses elsewhere, like the CI command's worker processes)
its bytes, which `loads` parses later with the same checks.

Reading can start where an earlier reader stopped (`Position`): JSON Lines at a byte
offset of the decompressed text (gzip is decompressed again up to it, never stored), an
array after a number of elements (split but not parsed).
"""

from __future__ import annotations

import io
import re
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import IO, TYPE_CHECKING, Any, cast

import orjson

from guardrails.engine.schema import bracket_count

if TYPE_CHECKING:  # gzip is imported for a compressed file only (the CLI's memory, start-up)
    import gzip

GZIP_MAGIC = b"\x1f\x8b"
STRING = re.compile(rb'"(?:[^"\\]|\\.)*"', re.DOTALL)
NOT_A_BRACKET = bytes(set(range(256)) - set(b"[]{}"))
SKIP_CHUNK = 1024 * 1024
#: What the readers ahead of the splitter may hold beyond an element's limit before the
#: element is refused with the file (a little over the limit is one bad trace).
READ_AHEAD = 256 * 1024


@dataclass(frozen=True)
class Limits:
    """The bounds a file is read within: the settings KINDGI_MAX_TRACE_BYTES, KINDGI_MAX_DEPTH,
    KINDGI_UPLOAD_MAX_BYTES_DECOMPRESSED (None: no bound) and KINDGI_UPLOAD_MAX_BLANK_LINES."""

    max_trace_bytes: int
    max_depth: int
    max_decompressed: int | None
    max_blank_lines: int


class UnreadableFile(Exception):
    """The file as a whole cannot be read (corrupt compression, not JSON, too big or too deep)."""


@dataclass(slots=True)
class Parsed:
    """One trace of a file, or why it could not be read. `line` for JSON Lines (1-based),
    `item` for the elements of a JSON array (1-based); `offset`, for JSON Lines, is the
    decompressed bytes read up to the end of its line."""

    line: int | None = None
    item: int | None = None
    document: Any = None
    error: str | None = None
    offset: int = 0
    #: The trace's bytes, when the reader was asked not to parse them.
    text: bytes | None = None
    #: The line of the file the trace starts on (an array's element: where its text begins).
    first_line: int = 0

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
    """The decompressed bytes of a file, refused once more than `limit` have been read.

    A gzip stream (`chunked`) is read a chunk at a time (readinto1): a readinto that fills
    the whole buffer from several chunks loses those it had when the stream breaks off (a
    file cut short), and with them the lines before the break."""

    def __init__(self, inner: IO[bytes] | gzip.GzipFile, limit: int | None, *, chunked: bool = False) -> None:
        super().__init__()
        self.inner = inner
        self.limit = limit
        self.count = 0
        reader = cast(io.BufferedIOBase, inner)
        self._readinto = reader.readinto1 if chunked else reader.readinto

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        size: int = self._readinto(buffer)  # (read would copy)
        self.count += size
        if self.limit is not None and self.count > self.limit:
            raise UnreadableFile(
                f"the file expands to more than {self.limit} bytes, the limit "
                "(KINDGI_UPLOAD_MAX_BYTES_DECOMPRESSED): the rest of the file is not read"
            )
        return size


def decompressed(raw: IO[bytes], limit: int | None) -> io.BufferedReader:
    """The file's bytes, gunzipped when it starts with the gzip magic bytes, size-limited.

    The caller keeps `raw` open (and closes it) for as long as it reads.
    """
    head = raw.read(2)
    raw.seek(0)
    inner: IO[bytes] | gzip.GzipFile = raw
    if head == GZIP_MAGIC:
        import gzip

        inner = gzip.GzipFile(fileobj=raw, mode="rb")
    limited = LimitedReader(inner, limit, chunked=inner is not raw)
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


def parse_file(
    raw: IO[bytes], name: str, limits: Limits, start: Position | None = None, *, parse: bool = True
) -> Iterator[Parsed]:
    """Every trace of the file from `start` on, each one parsed or with the reason it was not
    (`parse=False`: with its bytes in `text`, for `loads` to parse later)."""
    return parse_stream(decompressed(raw, limits.max_decompressed), name, limits, start or Position(), parse=parse)


def parse_stream(
    stream: io.BufferedReader, name: str, limits: Limits, start: Position, *, parse: bool = True
) -> Iterator[Parsed]:
    """As `parse_file`, from the decompressed stream (which the caller keeps open)."""
    with _reading():
        if file_format(name, stream) == "jsonl":
            yield from parse_lines(stream, limits, start, parse=parse)
        else:
            yield from parse_json(stream, limits, start, parse=parse)


def raw_entries(raw: IO[bytes], name: str, limits: Limits) -> Iterator[tuple[int, bytes | None, str | None]]:
    """Each trace of the file unparsed, as `parse_file(parse=False)` reads it: the line it
    starts on, and its bytes or why it was refused. For a reader that parses elsewhere and
    needs no Position (the CI command): a JSON Lines file costs no Parsed a line."""
    stream = decompressed(raw, limits.max_decompressed)
    with _reading():
        if file_format(name, stream) == "jsonl":
            for number, _offset, line, error in line_entries(stream, limits, Position()):
                yield number, line, error
            return
        for parsed in parse_json(stream, limits, Position(), parse=False):
            yield parsed.first_line, parsed.text, parsed.error


@contextmanager
def _reading() -> Iterator[None]:
    try:
        yield
    except (OSError, EOFError, zlib.error) as error:
        raise UnreadableFile(f"the file cannot be read: {error}") from error


# ---------------------------------------------------------------------------- JSON Lines


#: A line of JSON Lines: its number, the bytes read up to its end, its bytes or None, and
#: why it was refused (None when it was not).
LineEntry = tuple[int, int, bytes | None, str | None]


def parse_lines(stream: IO[bytes], limits: Limits, start: Position, *, parse: bool = True) -> Iterator[Parsed]:
    """JSON Lines: one trace a line; a line over the trace limit is refused without being kept."""
    for number, offset, line, error in line_entries(stream, limits, start):
        found = Parsed(line=number, first_line=number, offset=offset, error=error)
        if line is None:
            yield found
        else:
            yield loads(line, found, limits.max_depth) if parse else _unparsed(line, found)


def line_entries(stream: IO[bytes], limits: Limits, start: Position) -> Iterator[LineEntry]:
    """Each line of JSON Lines from `start` on but the blank ones: its number, the bytes read
    up to its end, and its bytes, or None and why it was refused (a line over the trace
    limit is refused without being kept; a long run of blank lines refuses the file)."""
    limit = limits.max_trace_bytes
    offset, number, blank_run = start.offset, start.count, 0
    _skip_bytes(stream, offset)
    readline = stream.readline
    while line := readline(limit + 1):
        offset += len(line)
        number += 1
        if len(line) > limit and not line.endswith(b"\n"):
            offset += _skip_rest_of_line(stream)
            yield number, offset, None, f"the line is over the limit of {limit} bytes"
        elif not line.isspace():  # (strip would copy the line)
            blank_run = 0
            yield number, offset, line, None
        else:
            blank_run += 1
            _refuse_long_blank_run(blank_run, number, limits.max_blank_lines)


def _unparsed(text: bytes, parsed: Parsed) -> Parsed:
    parsed.text = text
    return parsed


def _refuse_long_blank_run(blank_run: int, number: int, bound: int) -> None:
    if blank_run > bound:
        raise UnreadableFile(
            f"more than {bound} blank lines in a row (up to line {number}): the rest of the file is not read"
        )


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


def loads(text: bytes, parsed: Parsed, max_depth: int) -> Parsed:
    """Parse one trace's bytes, refusing them unparsed when they nest deeper than the limit."""
    parsed.text = None
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

    Too few brackets to be too deep is the common case, decided with one count; else the
    strings are removed and the brackets walked.
    """
    if bracket_count(text) <= max_depth:
        return False
    depth = 0
    for byte in STRING.sub(b"", text).translate(None, NOT_A_BRACKET):
        depth += 1 if byte in b"[{" else -1
        if depth > max_depth:
            return True
    return False


# ---------------------------------------------------------------------------- JSON


def parse_json(stream: io.BufferedReader, limits: Limits, start: Position, *, parse: bool = True) -> Iterator[Parsed]:
    """A JSON file: an array read one element at a time, or a single trace."""
    if _first_byte(stream) == b"[":
        yield from ArraySplitter(stream, limits, start.count, parse=parse).elements()
        return
    if start.count:
        return  # the single trace was read already
    limit = limits.max_trace_bytes
    text = stream.read(limit + 1)
    if len(text) > limit:
        yield Parsed(line=1, first_line=1, error=f"a single trace over the limit of {limit} bytes")
        return
    found = Parsed(line=1, first_line=1 + _leading_lines(text), offset=len(text))
    yield loads(text, found, limits.max_depth) if parse else _unparsed(text, found)


def _leading_lines(text: bytes) -> int:
    return text[: len(text) - len(text.lstrip())].count(b"\n")


#: What the splitter stops at: a whole string (its closing quote missing when the string
#: goes on past what was read), or a bracket or comma outside strings.
TOKEN = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*("?)|[\[\]{},]', re.DOTALL)
#: What it passes over inside an element, where commas do not matter: everything up to the
#: next bracket outside strings, whole strings included, within INSIDE_SPAN bytes (the
#: regular expression keeps a frame for each string it passes). It stops short of a string
#: that goes on past the span, which TOKEN then takes.
INSIDE = re.compile(rb'[^"\[\]{}]*(?:"[^"\\]*(?:\\.[^"\\]*)*"[^"\[\]{}]*)*', re.DOTALL)
INSIDE_SPAN = 8 * 1024
BRACKETS = b"[]{}"
READ_SIZE = 64 * 1024


class BrokenArray(Exception):
    """The array's text breaks off or is not an array of values: nothing after is read."""


class ArraySplitter:
    """Splits a JSON array into its elements' bytes as they stream by, in bounded memory.

    Only the brackets and commas outside strings are looked at: an element is the text
    between two commas (or a bracket and a comma) of the array's own level. Its nesting is
    counted on each opening bracket (the array itself is depth 1, an element's top 2) and
    its size as it grows, so the file is refused before an element past either limit is
    kept whole; each element is then parsed alone (`loads`), like a line of JSON Lines.
    The first `skip` elements are split and left unparsed (an earlier reader read them).
    """

    def __init__(self, stream: IO[bytes], limits: Limits, skip: int = 0, *, parse: bool = True) -> None:
        self.stream = stream
        self.limits = limits
        self.skip = skip
        self.parse = parse
        self.element_limit = limits.max_trace_bytes + READ_AHEAD
        self.buffer = b""
        self.number = 0  # elements split
        self.line = 1  # the line of `self.counted`, the position its new lines are counted up to
        self.counted = 0
        self.segment, self.segment_line = 0, 1  # where the element being split begins

    def elements(self) -> Iterator[Parsed]:
        try:
            yield from self._split()
        except BrokenArray as error:
            broken = self.number + 1
            if broken > self.skip:  # else the reader that read up to there reported it
                where = self.segment_line + _leading_lines(self.buffer[self.segment :])
                yield Parsed(
                    item=broken,
                    first_line=where,
                    error=f"not valid JSON from here on ({error}): the rest of the file is not read",
                )

    def _split(self) -> Iterator[Parsed]:
        self.buffer = self.stream.read(READ_SIZE)
        position, depth = self.buffer.index(b"[") + 1, 1  # "[" is the first byte not blank
        self._begin_element(position)
        while True:
            start = -1
            if depth > 1:  # inside an element: one step a bracket, not one a string or comma
                passed = INSIDE.match(self.buffer, position, position + INSIDE_SPAN).end()  # type: ignore[union-attr]
                if passed < len(self.buffer) and self.buffer[passed] in BRACKETS:
                    start, position = passed, passed + 1
                else:
                    position = passed
            if start < 0:
                found = TOKEN.search(self.buffer, position)
                if found is None or found.group(1) == b"":
                    # A string that goes on past the buffer is read again whole once more is read.
                    position = self._read_more(found.start() if found is not None else len(self.buffer))
                    continue
                start, position = found.start(), found.end()
            token = self.buffer[start]
            if token == 0x22:  # a string
                continue
            if token in b"[{":
                depth += 1
                if depth > self.limits.max_depth + 1:
                    raise UnreadableFile(
                        f"element {self.number + 1} is nested deeper than "
                        f"{self.limits.max_depth} levels (KINDGI_MAX_DEPTH): "
                        "the rest of the file is not read"
                    )
            elif token in b"]}":
                depth -= 1
                if depth == 0:  # the array's own closing bracket: what follows is not read
                    if token != 0x5D:
                        raise BrokenArray("a } closes the array")
                    text = self.buffer[self.segment : start]
                    if text.strip() or self.number:
                        yield from self._element(text)
                    return
            elif depth == 1:  # a comma of the array's own level ends an element
                yield from self._element(self.buffer[self.segment : start])
                self._begin_element(position)

    def _begin_element(self, position: int) -> None:
        """The next element's text begins at `position`: count the lines up to it."""
        self.line += self.buffer.count(b"\n", self.counted, position)
        self.segment = self.counted = position
        self.segment_line = self.line

    def _read_more(self, position: int) -> int:
        """Read on, keeping only the element being split; the position, moved with it."""
        data = self.stream.read(READ_SIZE)
        if not data:
            raise BrokenArray("the file ends before the array does")
        self.buffer = self.buffer[self.segment :] + data
        if len(self.buffer) > self.element_limit:
            raise UnreadableFile(
                f"element {self.number + 1} is over the limit of "
                f"{self.limits.max_trace_bytes} bytes: the rest of the file is not read"
            )
        position -= self.segment
        self.counted -= self.segment
        self.segment = 0
        return position

    def _element(self, text: bytes) -> Iterator[Parsed]:
        """The element whose text (blanks around it included) began on `segment_line`."""
        if not text.strip():
            raise BrokenArray("an element is missing")
        self.number += 1
        if self.number <= self.skip:
            return
        found = Parsed(item=self.number, first_line=self.segment_line + _leading_lines(text))
        text = text.strip()
        yield loads(text, found, self.limits.max_depth) if self.parse else _unparsed(text, found)
