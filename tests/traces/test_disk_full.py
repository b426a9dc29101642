"""A full disk under KINDGI_VAR_DIR (a real 4 MB tmpfs): an upload is refused with a clear
507 and leaves nothing behind, and beat goes on sending the periodic checks although it
cannot write its schedule."""

from __future__ import annotations

import errno
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
import redis
from django.conf import settings
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client

from kindgi_console.celery import app
from tests.conftest import make_trace
from tests.traces.workers import ROOT, RedisServer, Worker, wait_for
from traces.models import Upload

DISK_BYTES = 4 * 1024 * 1024


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 4 MB tmpfs mounted for the test (the tests run as root), unmounted after."""
    disk = tmp_path / "small-disk"
    disk.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={DISK_BYTES}", "tmpfs", str(disk)], capture_output=True, text=True
    )
    assert mounted.returncode == 0, f"could not mount a small tmpfs (these tests need root): {mounted.stderr}"
    try:
        yield disk
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=True)


def fill(disk: Path, leave: int) -> Path:
    """Write a file that leaves about `leave` bytes free on the disk."""
    stat = os.statvfs(disk)
    free = stat.f_bavail * stat.f_frsize
    filler = disk / "filler"
    with filler.open("ab") as out:
        out.write(b"\0" * max(0, free - leave))
    return filler


def files_under(folder: Path) -> list[Path]:
    return sorted(path for path in folder.rglob("*") if path.is_file())


def traces_file(size: int) -> bytes:
    line = orjson.dumps(make_trace("t", output="x" * 1000)) + b"\n"
    return b"".join(orjson.dumps({**orjson.loads(line), "id": f"t{n}"}) + b"\n" for n in range(size // len(line) + 1))


@pytest.mark.parametrize("size", [1_000_000, 3_000_000], ids=["in-memory", "spooled-to-a-temporary-file"])
def test_an_upload_to_a_full_disk_is_a_clear_507_and_leaves_nothing_behind(
    alice: Any, acme: Any, settings: Any, small_disk: Path, size: int
) -> None:
    settings.MEDIA_ROOT = str(small_disk / "media")
    filler = fill(small_disk, leave=size // 2)
    client = Client()
    client.force_login(alice)
    data = traces_file(size)

    def post(accept: str) -> Any:
        upload = {"file": SimpleUploadedFile("traces.jsonl", data), "tenant": "acme"}
        return client.post("/uploads/new/", upload, HTTP_ACCEPT=accept)

    answer = post("application/json")
    assert answer.status_code == 507, answer.content[:300]
    message = answer.json()["errors"][0]
    assert message["path"] == "/file" and "no space left" in message["message"]
    page = post("text/html,application/xhtml+xml,*/*;q=0.8")
    assert page.status_code == 507
    assert "no space left on the console" in page.content.decode()
    assert files_under(small_disk) == [filler]  # no partial file
    assert not Upload.objects.exists()  # no row

    filler.unlink()  # space again: the same upload is stored
    stored = post("application/json")
    assert stored.status_code == 302
    upload = Upload.objects.get()
    assert Path(upload.file.path).stat().st_size == len(data)


@pytest.mark.services
def test_beat_on_a_full_disk_goes_on_sending_the_periodic_checks(small_disk: Path, tmp_path: Path) -> None:
    fill(small_disk, leave=0)
    broker = RedisServer()
    broker.start()
    environ = {
        **os.environ,
        "KINDGI_VAR_DIR": str(small_disk),
        "CELERY_BROKER_URL": broker.url,
        "KINDGI_CHUNK_CHECK_SECONDS": "1",
    }
    with (tmp_path / "beat.log").open("wb") as log:
        beat = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "kindgi_console", "beat", "--loglevel", "INFO"],
            cwd=ROOT,
            env=environ,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    queue = redis.Redis.from_url(broker.url)
    try:
        # The periodic checks go to their own queue (the periodic role's), the rest to the runs'.
        queues = [*settings.KINDGI_QUEUES.values(), app.conf.task_default_queue]
        wait_for(lambda: beat.poll() is not None or sum(map(queue.llen, queues)) >= 3, 60, "three checks")
        sent = sum(map(queue.llen, queues))
        wait_for(lambda: beat.poll() is not None or sum(map(queue.llen, queues)) > sent, 30, "one check more")
        assert beat.poll() is None, (tmp_path / "beat.log").read_text()[-3000:]
    finally:
        beat.terminate()
        try:
            beat.wait(timeout=15)
        except subprocess.TimeoutExpired:
            beat.kill()
            beat.wait()
        broker.stop()
    assert "keeps the schedule in memory" in (tmp_path / "beat.log").read_text()


def test_a_schedule_write_that_fails_later_keeps_the_schedule_in_memory(
    small_disk: Path, monkeypatch: Any, caplog: Any
) -> None:
    from kindgi_console.beat import Scheduler

    scheduler = Scheduler(app, schedule_filename=str(small_disk / "schedule"), lazy=True)
    scheduler.setup_schedule()
    check = "requeue-expired-chunks"
    runs = scheduler.schedule[check].total_run_count

    def no_space() -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(scheduler._store, "sync", no_space)  # the disk filled meanwhile
    scheduler.sync()
    assert "keeps the schedule in memory" in caplog.text
    for _ in range(2):  # what sending the check does, then the next sync
        scheduler.reserve(scheduler.schedule[check])
        scheduler.sync()
    assert scheduler.schedule[check].total_run_count == runs + 2
    scheduler.close()


@pytest.mark.django_db(transaction=True)
def test_the_embedded_worker_on_a_full_disk_stays_up_and_works_once_there_is_room(
    small_disk: Path, tmp_path: Path
) -> None:
    """`runconsole`'s worker: the filesystem broker and beat under KINDGI_VAR_DIR."""
    for folder in ("queue", "processed", "control"):
        (small_disk / "broker" / folder).mkdir(parents=True)
    filler = fill(small_disk, leave=0)
    worker = Worker(
        "embedded",
        tmp_path,
        concurrency=1,
        beat=True,
        quiet=False,
        CELERY_BROKER_URL="filesystem://",
        KINDGI_VAR_DIR=str(small_disk),
        KINDGI_CHUNK_CHECK_SECONDS=1,
    )
    checked = re.compile(r"Task traces\.tasks\.requeue_expired_work\[[^]]+\] succeeded")
    try:
        wait_for(lambda: "Sending due task requeue-expired-chunks" in worker.output(), 60, "beat to send", worker)
        # A few checks that the broker cannot take.
        sending = "Sending due task requeue-expired-chunks"
        wait_for(lambda: worker.log.read_text(errors="replace").count(sending) >= 3, 30, "three checks", worker)
        assert worker.process.poll() is None, worker.output()
        filler.unlink()
        wait_for(lambda: bool(checked.search(worker.output())), 30, "a check to run", worker)
    finally:
        worker.stop()
    assert not list((small_disk / "broker").rglob("*.part")), "a half-written message was left"
