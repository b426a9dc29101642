"""Workers' heartbeats: pages of waiting work say when no worker has been seen, and
`runconsole` starts again a worker that dies."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone

from tests.traces import workers
from tests.traces.test_worker_recovery import real_broker  # noqa: F401 - a fixture
from tests.traces.workers import ROOT, answers, free_port, wait_for
from traces.models import Upload, WorkerHeartbeat
from traces.runs import evaluations
from traces.store import heartbeat

NOTICE = "No background worker has been seen"


def page(user: Any, url: str) -> str:
    client = Client()
    client.force_login(user)
    response = client.get(url)
    assert response.status_code == 200
    return response.content.decode()


def test_a_queued_run_says_when_no_worker_has_been_seen(alice: Any, acme: Any, halt_guardrail: Any) -> None:
    run = evaluations.create_run(evaluations.RunRequest(tenant=acme))
    url = f"/evaluations/{run.pk}/"
    assert f"{NOTICE} yet" in page(alice, url)
    heartbeat.beat("celery@here", 123)
    assert NOTICE not in page(alice, url)
    WorkerHeartbeat.objects.update(seen_at=timezone.now() - timedelta(minutes=5))
    assert f"{NOTICE} since" in page(alice, url)


def test_a_waiting_upload_says_it_too_and_a_finished_one_does_not(alice: Any, acme: Any) -> None:
    upload = Upload.objects.create(tenant=acme, uploaded_by=alice, original_name="a.jsonl", file="x")
    assert NOTICE in page(alice, f"/uploads/{upload.pk}/")
    Upload.objects.filter(pk=upload.pk).update(status="succeeded")
    assert NOTICE not in page(alice, f"/uploads/{upload.pk}/")


def test_charlie_sees_no_notice_of_acme(alice: Any, charlie: Any, acme: Any) -> None:
    upload = Upload.objects.create(tenant=acme, uploaded_by=alice, original_name="a.jsonl", file="x")
    client = Client()
    client.force_login(charlie)
    assert client.get(f"/uploads/{upload.pk}/").status_code == 404


def beating_pid() -> int | None:
    workers = WorkerHeartbeat.objects.exclude(hostname__startswith=heartbeat.BEAT_PREFIX)  # not the embedded beat's
    return workers.order_by("-seen_at").values_list("pid", flat=True).first()


def kill_tree(pid: int) -> None:
    children = [int(c) for t in Path(f"/proc/{pid}/task").iterdir() for c in (t / "children").read_text().split()]
    for process in [pid, *children]:
        os.kill(process, signal.SIGKILL)


@pytest.mark.services
@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("real_broker")
def test_runconsole_starts_again_a_worker_that_dies(tmp_path: Path) -> None:
    port = free_port()
    environ = {
        **os.environ,
        "DATABASE_URL": workers.test_database_url(),
        "CELERY_TASK_ALWAYS_EAGER": "false",
        "KINDGI_WORKER_HEARTBEAT_SECONDS": "1",
        "KINDGI_VAR_DIR": str(tmp_path / "var"),
    }
    with (tmp_path / "console.log").open("wb") as log:
        console = subprocess.Popen(
            [sys.executable, "manage.py", "runconsole", f"127.0.0.1:{port}"],
            cwd=ROOT,
            env=environ,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    try:
        wait_for(lambda: answers(port) and beating_pid() is not None, 60, "the console and its worker")
        first = beating_pid()
        assert first is not None
        kill_tree(first)
        wait_for(lambda: beating_pid() not in (None, first), 60, "a new worker's heartbeat")
        assert console.poll() is None
    finally:
        console.terminate()
        console.wait(timeout=30)
    assert "The background worker exited (code -9); starting a new one." in (tmp_path / "console.log").read_text()


def test_a_second_sigterm_while_the_worker_shuts_down_kills_it_at_once() -> None:
    """An operator who presses Ctrl-C twice (or a supervisor that signals twice) while the
    worker finishes its task: runconsole ends and so does its worker, at once, instead of
    the worker living on, orphaned, in a warm shutdown."""
    from kindgi_console.management.commands.runconsole import _stop

    slow = subprocess.Popen(["bash", "-c", "trap '' TERM; sleep 60 & wait"])  # a warm shutdown that takes long
    time.sleep(0.2)  # (bash has set its trap)

    def second_sigterm(*_: Any) -> None:
        raise SystemExit(0)  # what runconsole's SIGTERM handler does

    previous = signal.signal(signal.SIGALRM, second_sigterm)
    signal.setitimer(signal.ITIMER_REAL, 0.5)
    started = time.monotonic()
    try:
        with pytest.raises(SystemExit):
            _stop(slow)
        ended = slow.poll()  # when _stop gave up waiting
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        if slow.poll() is None:
            slow.kill()
            slow.wait()
    assert ended == -signal.SIGKILL and time.monotonic() - started < 5
