"""Trace files uploaded from a page: stored as streamed, read back in bounded memory.

A file is JSON (one RunTrace, or an array of them) or JSON Lines (one RunTrace a line,
blank lines skipped), either of them possibly gzip-compressed (recognised by its magic
bytes, whatever its name). JSON Lines are read one line at a time, and an array one
element at a time with ijson's incremental parser, so a 1 GB file needs no more memory
than a batch of traces. Good traces go through the REST ingestion code (`traces.ingest`):
the same validation, the same idempotency (duplicate, conflict) and the same runtime
evaluation of each stored batch.
"""

from __future__ import annotations

import gzip
import io
import logging
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from itertools import islice
from typing import IO, Any

import ijson
import orjson
from django.conf import settings
from django.core.files.uploadedfile import UploadedFile
from django.db.models import Q
from django.utils import timezone

from guardrails.engine.types import Issue
from kindgi_console.tenancy.models import Tenant
from kindgi_console.tenancy.scoping import Caller, TenantDenied
from traces import ingest
from traces.models import RunTrace, Upload
from traces.services import queue_runtime_evaluation

logger = logging.getLogger(__name__)

GZIP_MAGIC = b"\x1f\x8b"
ACCEPTED_SUFFIXES = (".json", ".jsonl", ".ndjson", ".json.gz", ".jsonl.gz", ".ndjson.gz", ".gz")


class UnreadableFile(Exception):
    """The file as a whole cannot be read (corrupt compression, not JSON at all)."""


# ---------------------------------------------------------------------------- reading a file


@dataclass
class Parsed:
    """One trace of a file, or why it could not be read. `line` for JSON Lines (1-based),
    `item` for the elements of a JSON array (1-based)."""

    line: int | None = None
    item: int | None = None
    document: Any = None
    error: str | None = None

    @property
    def where(self) -> dict[str, int | None]:
        return {"line": self.line, "item": self.item}


def decompressed(raw: IO[bytes]) -> io.BufferedReader:
    """The file's bytes, gunzipped when it starts with the gzip magic bytes."""
    head = raw.read(2)
    raw.seek(0)
    stream: IO[bytes] = gzip.GzipFile(fileobj=raw, mode="rb") if head == GZIP_MAGIC else raw
    return io.BufferedReader(stream, buffer_size=64 * 1024)  # type: ignore[arg-type]


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


def parse_file(raw: IO[bytes], name: str) -> Iterator[Parsed]:
    """Every trace of the file in order, each one parsed or with the reason it was not."""
    return parse_stream(decompressed(raw), name)


def parse_stream(stream: io.BufferedReader, name: str) -> Iterator[Parsed]:
    """As `parse_file`, from the decompressed stream (which the caller keeps open)."""
    try:
        if file_format(name, stream) == "jsonl":
            yield from parse_lines(stream)
        else:
            yield from parse_json(stream)
    except (OSError, EOFError, zlib.error) as error:
        raise UnreadableFile(f"the file cannot be read: {error}") from error


def parse_lines(stream: IO[bytes]) -> Iterator[Parsed]:
    """JSON Lines: one trace a line; a line over the trace limit is refused without being kept."""
    limit = settings.KINDGI_MAX_TRACE_BYTES
    number = 0
    while True:
        line = stream.readline(limit + 1)
        if not line:
            return
        number += 1
        if len(line) > limit and not line.endswith(b"\n"):
            _skip_rest_of_line(stream)
            yield Parsed(line=number, error=f"the line is over the limit of {limit} bytes")
            continue
        if not line.strip():
            continue
        yield _loads(line, Parsed(line=number))


def _skip_rest_of_line(stream: IO[bytes]) -> None:
    while True:
        piece = stream.readline(64 * 1024)
        if not piece or piece.endswith(b"\n"):
            return


def _loads(text: bytes, parsed: Parsed) -> Parsed:
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


def parse_json(stream: io.BufferedReader) -> Iterator[Parsed]:
    """A JSON file: an array read one element at a time, or a single trace."""
    if _first_byte(stream) != b"[":
        text = stream.read(settings.KINDGI_MAX_TRACE_BYTES + 1)
        if len(text) > settings.KINDGI_MAX_TRACE_BYTES:
            yield Parsed(line=1, error="a single trace over the limit of "
                                       f"{settings.KINDGI_MAX_TRACE_BYTES} bytes")
            return
        yield _loads(text, Parsed(line=1))
        return
    number = 0
    try:
        for number, document in enumerate(ijson.items(stream, "item", use_float=True), 1):
            yield Parsed(item=number, document=document)
    except ijson.JSONError as error:
        yield Parsed(item=number + 1, error=f"not valid JSON from here on ({error}): the rest of the file is not read")


# ---------------------------------------------------------------------------- processing


class UploadCaller(Caller):
    """Writes to the upload's tenant (the uploader's right was checked when it was uploaded).

    A trace naming another tenant is a bad line, not a refused request.
    """

    def __init__(self, tenant: Tenant) -> None:
        super().__init__()
        self.upload_tenant = tenant

    def tenant_for_write(self, slug: str | None, scope: str) -> Tenant:
        if slug and slug != self.upload_tenant.slug:
            raise TenantDenied(f"this upload is for tenant {self.upload_tenant.slug!r}, not {slug!r}", status=400)
        return self.upload_tenant


@dataclass
class Progress:
    """What became of the file's traces so far; written to the upload after every batch."""

    total: int = 0
    stored: int = 0
    duplicate: int = 0
    conflict: int = 0
    invalid: int = 0
    errors: list[dict[str, Any]] = field(default_factory=list)
    errors_total: int = 0

    def add_error(self, parsed: Parsed, path: str, message: str) -> None:
        self.errors_total += 1
        if len(self.errors) < settings.KINDGI_UPLOAD_MAX_ERRORS:
            self.errors.append({**parsed.where, "path": path, "message": message})

    def columns(self) -> dict[str, Any]:
        return {
            "lines_total": self.total,
            "lines_stored": self.stored,
            "lines_duplicate": self.duplicate,
            "lines_conflict": self.conflict,
            "lines_invalid": self.invalid,
            "errors": self.errors,
            "errors_total": self.errors_total,
        }


def save_upload(file: UploadedFile, tenant: Tenant, user: Any, *, evaluate_after: bool = False) -> Upload:
    """Store an uploaded file (copied in chunks, never read whole) and queue its processing."""
    from django.db import transaction

    from traces.evaluations import lease
    from traces.tasks import process_upload as process_task

    name = file.name or "traces.jsonl"
    upload = Upload(
        tenant=tenant, uploaded_by=user, original_name=name[:300], size=file.size or 0,
        evaluate_after=evaluate_after, lease_until=timezone.now() + lease(),
    )
    upload.file.save(name.rsplit("/", 1)[-1][:200], file, save=False)
    upload.save()
    transaction.on_commit(lambda: process_task.delay(upload.pk))
    return upload


def claim_upload(upload_id: int) -> Upload | None:
    from traces.evaluations import lease

    now = timezone.now()
    claimable = Q(status=Upload.Status.QUEUED) | Q(status=Upload.Status.RUNNING, lease_until__lt=now)
    claimed = Upload.objects.filter(claimable, pk=upload_id).update(
        status=Upload.Status.RUNNING, started_at=now, lease_until=now + lease(), bytes_read=0,
    )
    return Upload.objects.select_related("tenant").filter(pk=upload_id).first() if claimed else None


def process_upload(upload_id: int) -> None:
    """Read the upload's file batch by batch; every count is visible as it goes."""
    upload = claim_upload(upload_id)
    if upload is None:
        return
    progress = Progress()
    caller = UploadCaller(upload.tenant)
    try:
        with upload.file.open("rb") as raw:
            stream = decompressed(raw)  # held here: dropping it would close the file
            traces = parse_stream(stream, upload.original_name)
            while batch := list(islice(traces, settings.KINDGI_UPLOAD_BATCH)):
                store_batch(upload, caller, batch, progress)
                _save_progress(upload, progress, bytes_read=raw.tell())
    except (UnreadableFile, OSError) as error:
        _finish(upload, progress, Upload.Status.FAILED, failure=str(error))
        return
    _finish(upload, progress, Upload.Status.SUCCEEDED)
    if upload.evaluate_after:
        start_evaluation_of(upload, progress)


def store_batch(upload: Upload, caller: Caller, batch: list[Parsed], progress: Progress) -> None:
    """Validate and store one batch as the REST ingestion does; tag the traces with the upload."""
    items = [
        None if parsed.error is not None else ingest.prepare(caller, parsed.document, index)
        for index, parsed in enumerate(batch)
    ]
    ingest.store([item for item in items if item is not None], on_created=queue_runtime_evaluation)
    delivered = [
        item.row_id for item in items if item is not None and item.status in (ingest.CREATED, ingest.DUPLICATE)
    ]
    RunTrace.objects.filter(pk__in=delivered).update(upload=upload)
    for parsed, item in zip(batch, items, strict=True):
        progress.total += 1
        if item is None:
            progress.invalid += 1
            progress.add_error(parsed, "", parsed.error or "unreadable")
        else:
            _count(parsed, item, progress)


def _count(parsed: Parsed, item: ingest.Item, progress: Progress) -> None:
    if item.status == ingest.CREATED:
        progress.stored += 1
    elif item.status == ingest.DUPLICATE:
        progress.duplicate += 1
    else:
        if item.status == ingest.CONFLICT:
            progress.conflict += 1
        else:
            progress.invalid += 1
        issue = item.errors[0] if item.errors else Issue("", item.status)
        progress.add_error(parsed, issue.path, issue.message)


def _save_progress(upload: Upload, progress: Progress, *, bytes_read: int) -> None:
    from traces.evaluations import lease

    Upload.objects.filter(pk=upload.pk).update(
        **progress.columns(), bytes_read=bytes_read, lease_until=timezone.now() + lease()
    )


def _finish(upload: Upload, progress: Progress, status: str, failure: str = "") -> None:
    Upload.objects.filter(pk=upload.pk).update(
        **progress.columns(), status=status, failure=failure, finished_at=timezone.now(),
        bytes_read=upload.size, lease_until=None,
    )


def start_evaluation_of(upload: Upload, progress: Progress) -> None:
    """The evaluation asked for with the upload: its traces against every enabled guardrail."""
    from traces.evaluations import RunRequest, RunRequestError, create_run

    if progress.stored + progress.duplicate == 0:
        return
    user = upload.uploaded_by
    try:
        run = create_run(RunRequest(
            tenant=upload.tenant, filters={"upload": upload.pk}, mode="ci", started_by=user,
            label=getattr(user, "username", "") or "upload",
        ))
    except RunRequestError as error:
        Upload.objects.filter(pk=upload.pk).update(failure=f"no evaluation was started: {error}")
        return
    Upload.objects.filter(pk=upload.pk).update(evaluation=run)
