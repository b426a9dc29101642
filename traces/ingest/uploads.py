"""Trace files uploaded from a page: stored as streamed, read back in resumable pieces.

The file is read by `traces.ingest.trace_files` (JSON or JSON Lines, gzip or not, bounded in
memory, depth and decompressed size). Good traces go through the REST ingestion code
(`traces.ingest.documents`): the same validation, the same idempotency (duplicate, conflict) and
the same runtime evaluation of each stored batch.

An upload is read in pieces, one task each, every piece well under the task time limit
(`KINDGI_UPLOAD_PIECE_LINES` traces or `KINDGI_UPLOAD_PIECE_SECONDS`, whichever comes
first). Each batch is stored in the same transaction as the counts and the position it
reached, so a piece that is cut off (a lost worker, a time limit) is taken up by the
next task from the last stored batch, and the counts stay exact. A task claims the
upload by raising its `claim` number; a task whose claim was taken over writes nothing
more. An upload whose reading was lost `KINDGI_CHUNK_MAX_ATTEMPTS` times in a row at
the same place fails with the reason.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from itertools import islice
from typing import Any

from celery.exceptions import SoftTimeLimitExceeded
from django.conf import settings
from django.core.files import File
from django.db import transaction
from django.db.models import F, Q, Value
from django.db.models.functions import Coalesce
from django.utils import timezone

from guardrails.engine.types import Issue
from kindgi_console import tasking
from kindgi_console.tenancy.models import Tenant
from kindgi_console.tenancy.scoping import Caller, TenantDenied
from traces.ingest import documents
from traces.ingest.evaluate import queue_runtime_evaluation
from traces.ingest.outbox import UNREACHABLE
from traces.ingest.trace_files import Parsed, Position, UnreadableFile, parse_file
from traces.models import RunTrace, Upload
from traces.store import signals
from traces.store.leases import chunk_lease, lease, sent_before

logger = logging.getLogger(__name__)

ACCEPTED_SUFFIXES = (".json", ".jsonl", ".ndjson", ".json.gz", ".jsonl.gz", ".ndjson.gz", ".gz")


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

    @classmethod
    def of(cls, upload: Upload) -> Progress:
        """The counts the upload's earlier pieces stored."""
        return cls(
            total=upload.lines_total,
            stored=upload.lines_stored,
            duplicate=upload.lines_duplicate,
            conflict=upload.lines_conflict,
            invalid=upload.lines_invalid,
            errors=list(upload.errors),
            errors_total=upload.errors_total,
        )

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


#: What a write to a disk with no room left raises (its errno): full, or over a quota.
NO_SPACE = (errno.ENOSPC, errno.EDQUOT)


class NoSpace(Exception):
    """The uploaded file could not be stored: no space is left on the disk of MEDIA_ROOT
    (under KINDGI_VAR_DIR). Nothing of it was kept."""

    message = (
        "there is no space left on the console's disk to store this file; nothing of it was kept. "
        "Try again once an operator has freed space."
    )


def save_upload(file: File[bytes], tenant: Tenant, user: Any, *, evaluate_after: bool = False) -> Upload:
    """Store an uploaded file (copied in chunks, never read whole) and queue its processing.

    The file and its row are kept together or not at all: a file cut short by a full disk
    (NoSpace) or whose row could not be written is removed.
    """
    name = file.name or "traces.jsonl"
    upload = Upload(
        tenant=tenant,
        uploaded_by=user,
        original_name=name[:300],
        size=file.size or 0,
        evaluate_after=evaluate_after,
        lease_until=timezone.now() + lease(),
    )
    stored = _store_file(upload, file, name.rsplit("/", 1)[-1][:200])
    try:
        upload.file = stored
        upload.save()
    except BaseException:
        upload.file.storage.delete(stored)
        raise
    transaction.on_commit(lambda: _send(upload.pk))
    return upload


def _store_file(upload: Upload, file: File[bytes], base_name: str) -> str:
    """Copy the file to the upload's storage; its name there. What a failed copy wrote is
    removed: the name is the upload's own (`upload_path`), so nothing else wrote it."""
    field = upload.file.field
    storage = upload.file.storage
    name = storage.get_available_name(field.generate_filename(upload, base_name), max_length=field.max_length)
    try:
        return str(storage.save(name, file, max_length=field.max_length))
    except BaseException as error:
        with contextlib.suppress(OSError):
            storage.delete(name)
        if isinstance(error, OSError) and error.errno in NO_SPACE:
            logger.error("an upload of %s bytes could not be stored in %s: %s", file.size, storage.path(name), error)
            raise NoSpace(str(error)) from error
        raise


def _send(upload_id: int) -> None:
    """Send the upload's next task; a broker that cannot be reached leaves it to the
    periodic check, which sends it once its lease has run out."""
    try:
        tasking.send("traces.tasks.process_upload", upload_id, retry=False)
    except UNREACHABLE as error:
        logger.warning("upload %s waits for the broker: %s", upload_id, error)


class LostClaim(Exception):
    """Another task took the upload over (this one's lease ran out): it writes nothing more."""


def claim_upload(upload_id: int) -> Upload | None:
    """Take the upload for one piece: queued, or running with a lease that ran out.

    A running upload holds the short lease of a running chunk, renewed with every batch
    stored, so a lost worker's upload is taken over in seconds.
    """
    now = timezone.now()
    claimable = Q(status=Upload.Status.QUEUED) | Q(status=Upload.Status.RUNNING, lease_until__lt=now)
    claimed = Upload.objects.filter(claimable, pk=upload_id).update(
        status=Upload.Status.RUNNING,
        started_at=Coalesce(F("started_at"), Value(now)),
        lease_until=now + chunk_lease(),
        claim=F("claim") + 1,
        attempts=F("attempts") + 1,
    )
    return Upload.objects.select_related("tenant").filter(pk=upload_id).first() if claimed else None


def process_upload(upload_id: int) -> None:
    """Read the next piece of the upload; send the piece after it, or finish the upload."""
    upload = claim_upload(upload_id)
    if upload is None:
        return
    if upload.attempts > settings.KINDGI_CHUNK_MAX_ATTEMPTS:
        _finish(upload, Progress.of(upload), Upload.Status.FAILED, failure=_given_up(upload))
        return
    try:
        finished, progress = read_piece(upload)
    except LostClaim:
        logger.warning("upload %s was taken over by another task", upload_id)
        return
    except (UnreadableFile, OSError) as error:
        stored = Progress.of(Upload.objects.get(pk=upload.pk))  # the counts of the stored batches
        _finish(upload, stored, Upload.Status.FAILED, failure=str(error))
        return
    except SoftTimeLimitExceeded:
        finished, progress = False, Progress()
    if not finished:
        _next_piece(upload)
        return
    if (
        _finish(upload, progress, Upload.Status.SUCCEEDED)
        and upload.evaluate_after
        and progress.stored + progress.duplicate
    ):
        signals.upload_evaluation_asked.send(Upload, upload=upload)


def _given_up(upload: Upload) -> str:
    where = f"after {upload.resume_at} traces" if upload.resume_at else "at its start"
    return (
        f"the worker reading this file was lost {upload.attempts - 1} times in a row {where} "
        "(it may have run out of memory or time): the rest of the file is not read"
    )


def read_piece(upload: Upload) -> tuple[bool, Progress]:
    """Store batches from where the last piece stopped; whether the file was read to its end.

    A piece ends after KINDGI_UPLOAD_PIECE_LINES traces or KINDGI_UPLOAD_PIECE_SECONDS,
    whichever comes first, at the end of a batch.
    """
    progress = Progress.of(upload)
    caller = UploadCaller(upload.tenant)
    ends = time.monotonic() + settings.KINDGI_UPLOAD_PIECE_SECONDS
    left = settings.KINDGI_UPLOAD_PIECE_LINES
    start = Position(offset=upload.resume_offset, count=upload.resume_at)
    with upload.file.open("rb") as raw:
        traces = parse_file(raw, upload.original_name, start)
        while batch := _next_batch(traces, size := min(settings.KINDGI_UPLOAD_BATCH, left)):
            with transaction.atomic():
                store_batch(upload, caller, batch.traces, progress)
                _save_progress(upload, progress, batch.traces[-1].position, bytes_read=raw.tell())
            if batch.fault is not None:
                raise batch.fault
            if len(batch.traces) < size:  # the file ended
                break
            left -= size
            if left <= 0 or time.monotonic() >= ends:
                return False, progress
    return True, progress


def store_batch(upload: Upload, caller: Caller, batch: list[Parsed], progress: Progress) -> None:
    """Validate and store one batch as the REST ingestion does; tag the traces with the upload."""
    items = [
        None if parsed.error is not None else documents.prepare(caller, parsed.document, index)
        for index, parsed in enumerate(batch)
    ]
    documents.store([item for item in items if item is not None], on_created=queue_runtime_evaluation)
    delivered = [
        item.row_id
        for item in items
        if item is not None and item.row_id is not None and item.status in (documents.CREATED, documents.DUPLICATE)
    ]
    RunTrace.objects.filter(pk__in=delivered).update(upload=upload)
    for parsed, item in zip(batch, items, strict=True):
        progress.total += 1
        if item is None:
            progress.invalid += 1
            progress.add_error(parsed, "", parsed.error or "unreadable")
        else:
            _count(parsed, item, progress)


def _count(parsed: Parsed, item: documents.Item, progress: Progress) -> None:
    if item.status == documents.CREATED:
        progress.stored += 1
    elif item.status == documents.DUPLICATE:
        progress.duplicate += 1
    else:
        if item.status == documents.CONFLICT:
            progress.conflict += 1
        else:
            progress.invalid += 1
        issue = item.errors[0] if item.errors else Issue("", item.status)
        progress.add_error(parsed, issue.path, issue.message)


@dataclass
class Batch:
    """The next traces of the file; `fault`, when the file could not be read further."""

    traces: list[Parsed]
    fault: UnreadableFile | None = None

    def __bool__(self) -> bool:
        return bool(self.traces)


def _next_batch(traces: Iterator[Parsed], size: int) -> Batch | None:
    """Up to `size` traces; those read before the file turned unreadable are kept."""
    batch = Batch([])
    try:
        batch.traces.extend(islice(traces, size))
    except UnreadableFile as fault:
        if not batch.traces:
            raise
        batch.fault = fault
    return batch if batch.traces else None


def _save_progress(upload: Upload, progress: Progress, position: Position, *, bytes_read: int) -> None:
    """The counts and where the next batch starts, in the batch's transaction (or nothing)."""
    saved = Upload.objects.filter(pk=upload.pk, claim=upload.claim).update(
        **progress.columns(),
        resume_offset=position.offset,
        resume_at=position.count,
        bytes_read=min(bytes_read, upload.size),
        lease_until=timezone.now() + chunk_lease(),
        attempts=0,
    )
    if not saved:
        raise LostClaim(upload.pk)


def _next_piece(upload: Upload) -> None:
    """Hand the upload to the next task (the lease covers the message on its way)."""
    released = Upload.objects.filter(pk=upload.pk, claim=upload.claim).update(
        status=Upload.Status.QUEUED, lease_until=timezone.now() + lease()
    )
    if released:
        _send(upload.pk)


def _finish(upload: Upload, progress: Progress, status: str, failure: str = "") -> bool:
    finished = bool(
        Upload.objects.filter(pk=upload.pk, claim=upload.claim).update(
            **progress.columns(),
            status=status,
            failure=failure,
            finished_at=timezone.now(),
            bytes_read=upload.size,
            lease_until=None,
        )
    )
    if finished and status == Upload.Status.FAILED:
        _announce_failure(upload.pk, upload.tenant_id, failure)
    return finished


def _announce_failure(upload_id: int, tenant_id: int, failure: str) -> None:
    """Tell the apps that listen (alerts) that an upload failed for good."""
    signals.upload_failed.send(Upload, upload_id=upload_id, tenant_id=tenant_id, error=failure)


def fail_upload(upload_id: int, reason: str) -> None:
    """The upload's reading failed for good: failed, with the counts of its stored batches."""
    failure = f"the file could not be read to its end: {reason}"
    failed = Upload.objects.filter(pk=upload_id, status__in=[Upload.Status.QUEUED, Upload.Status.RUNNING]).update(
        status=Upload.Status.FAILED, failure=failure, finished_at=timezone.now(), lease_until=None
    )
    tenant_id = Upload.objects.filter(pk=upload_id).values_list("tenant_id", flat=True).first()
    if failed and tenant_id is not None:
        _announce_failure(upload_id, tenant_id, failure)


def requeue_stale_uploads(now: datetime, lost_before: datetime | None = None) -> int:
    """Send again the uploads whose lease ran out (their worker was lost, or their message),
    and the queued ones sent before `lost_before` (the broker may have lost their message).

    Each goes back to `queued` so that the task sent claims it; a running upload with a
    fresh lease would be skipped. Returns how many were sent.
    """
    stale = Q(status__in=[Upload.Status.QUEUED, Upload.Status.RUNNING], lease_until__lt=now)
    if lost_before is not None:
        stale |= Q(status=Upload.Status.QUEUED, lease_until__lt=sent_before(lost_before))
    sent = 0
    for upload_id in list(Upload.objects.filter(stale).values_list("pk", flat=True)):
        renewed = Upload.objects.filter(stale, pk=upload_id).update(
            status=Upload.Status.QUEUED, lease_until=now + lease()
        )
        if renewed:
            _send(upload_id)
            sent += 1
    return sent
