"""Uploads on real Celery workers (the configured broker, the test database): a hostile
file leaves the worker's memory bounded, and a worker killed mid-upload loses nothing."""

from __future__ import annotations

import gzip
import io
from pathlib import Path
from typing import Any

import orjson
import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from tests.conftest import make_trace
from tests.traces.test_worker_recovery import real_broker  # noqa: F401 - a fixture
from tests.traces.workers import Worker, wait_for
from traces.ingest.uploads import save_upload
from traces.models import RunTrace, Upload

pytestmark = [pytest.mark.services, pytest.mark.django_db(transaction=True)]

MAX_WORKER_RSS = 300 * 1024 * 1024


def peak_rss(pid: int) -> int:
    """The highest resident memory the process or any of its children (the pool) reached."""
    peaks = []
    for process in [pid, *_children(pid)]:
        status = Path(f"/proc/{process}/status").read_text()
        peaks.append(next(int(line.split()[1]) * 1024 for line in status.splitlines() if line.startswith("VmHWM")))
    return max(peaks)


def _children(pid: int) -> list[int]:
    found = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        found += [int(child) for child in (task / "children").read_text().split()]
    return found


def final(upload: Upload) -> bool:
    upload.refresh_from_db()
    return upload.is_final


@pytest.mark.usefixtures("real_broker")
def test_a_200000_deep_array_fails_with_the_reason_and_the_worker_stays_small(
    acme: Any, alice: Any, tmp_path: Path
) -> None:
    data = gzip.compress(b"[" * 200_000 + b"]" * 200_000)
    assert len(data) < 2000
    upload = save_upload(SimpleUploadedFile("deep.json.gz", data), acme, alice)
    worker = Worker("deep", tmp_path, concurrency=1)
    try:
        wait_for(lambda: final(upload), 60, "the upload to end", worker)
        peak = peak_rss(worker.process.pid)
    finally:
        worker.stop()
    assert upload.status == "failed", worker.output()
    assert "element 1 is nested deeper than 64 levels" in upload.failure
    assert peak < MAX_WORKER_RSS, f"the worker reached {peak / 2**20:.0f} MB"


LINES = 50_000
REPEATS = 250  # every 200th line repeats an earlier one: a duplicate
WORKER_SETTINGS: dict[str, Any] = {
    "KINDGI_CHUNK_LEASE_SECONDS": 3,
    "CELERY_VISIBILITY_TIMEOUT": 5,
    # The time limits scaled down, far under what the whole file takes: each piece (at
    # most 2 s, a quarter of the soft limit, or 4,000 lines) is a task of its own.
    "CELERY_TASK_SOFT_TIME_LIMIT": 8,
    "CELERY_TASK_TIME_LIMIT": 10,
    "KINDGI_UPLOAD_PIECE_LINES": 4_000,
}


def many_lines() -> bytes:
    template = make_trace()
    out = io.BytesIO()
    with gzip.GzipFile(fileobj=out, mode="wb", compresslevel=1) as gz:
        for n in range(LINES):
            trace_id = f"run-{n - 100 if n % 200 == 199 else n:06d}"
            gz.write(orjson.dumps({**template, "id": trace_id}) + b"\n")
    return out.getvalue()


@pytest.mark.usefixtures("real_broker")
def test_a_worker_killed_mid_upload_is_resumed_where_it_stopped_with_exact_counts(
    acme: Any, alice: Any, settings: Any, tmp_path: Path
) -> None:
    settings.KINDGI_CHUNK_LEASE_SECONDS = 3
    upload = save_upload(SimpleUploadedFile("many.jsonl.gz", many_lines()), acme, alice)
    first = Worker("first", tmp_path, concurrency=1, **WORKER_SETTINGS)
    try:
        wait_for(lambda: _read(upload) >= LINES // 4, 180, "a quarter of the file", first)
    finally:
        first.kill()
    upload.refresh_from_db()
    assert upload.status in ("running", "queued") and upload.lines_total < LINES, "nothing was tested"
    killed_at = upload.lines_total

    second = Worker("second", tmp_path, concurrency=2, **WORKER_SETTINGS)
    try:
        wait_for(lambda: final(upload), 300, "the upload to end", second)
    finally:
        second.stop()
    assert upload.status == "succeeded", second.output()
    assert (
        upload.lines_total,
        upload.lines_stored,
        upload.lines_duplicate,
        upload.lines_conflict,
        upload.lines_invalid,
    ) == (LINES, LINES - REPEATS, REPEATS, 0, 0), f"killed at {killed_at}"
    assert RunTrace.objects.filter(upload=upload).count() == LINES - REPEATS
    assert upload.claim > 10, "the file was read in one or a few tasks: the pieces were not tested"


def _read(upload: Upload) -> int:
    return Upload.objects.filter(pk=upload.pk).values_list("lines_total", flat=True).get()
