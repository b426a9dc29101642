"""Background work of traces: evaluation runs, runtime evaluation of ingested batches, uploads.

Thin shells around `traces.evaluations`, `traces.services` and `traces.uploads`: each task
takes primary keys, re-reads its rows (a row that has gone is nothing to do), keeps its
state in those rows, and is safe to run twice. Messages are acknowledged after the task
ran (`acks_late`), so a message whose worker was lost is delivered again; transient
database and broker faults are retried with exponential backoff.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime
from functools import partial
from typing import Any

from celery import Task, shared_task
from celery.signals import worker_ready, worker_shutdown
from django.conf import settings
from django.db import InterfaceError, OperationalError
from django.utils import timezone
from kombu.exceptions import OperationalError as BrokerError

from kindgi_console import jobs
from traces import evaluations, heartbeat, leases, outbox, retention, services, uploads
from traces.otlp import turns as otlp_turns

logger = logging.getLogger(__name__)

#: Faults that go away by themselves: a database restarting or locked, a broker unreachable.
TRANSIENT = (OperationalError, InterfaceError, BrokerError)

TASK_OPTIONS: dict[str, Any] = {
    "acks_late": True,
    "reject_on_worker_lost": True,
    "autoretry_for": TRANSIENT,
    "retry_backoff": 2,
    "retry_backoff_max": 120,
    "retry_jitter": True,
    "max_retries": 8,
}


class ChunkTask(Task):  # type: ignore[misc]
    """A chunk that fails for good (not a transient fault) fails its run, with the reason."""

    def on_failure(self, exc: BaseException, task_id: str, args: Any, kwargs: Any, einfo: Any) -> None:
        chunk_id = args[0] if args else kwargs.get("chunk_id")
        evaluations.fail_run_of_chunk(chunk_id, f"a chunk failed: {reason_of(exc)}")


class StartTask(Task):  # type: ignore[misc]
    """A run that cannot be planned for good (not a transient fault) fails, with the reason;
    it does not stay `queued` to be sent again by every recovery check."""

    def on_failure(self, exc: BaseException, task_id: str, args: Any, kwargs: Any, einfo: Any) -> None:
        evaluation_id = args[0] if args else kwargs.get("evaluation_id")
        evaluations.fail_run(evaluation_id, f"the run could not start: {reason_of(exc)}")


@contextmanager
def failing_the_run_for_good(fail: Callable[[str], None], what: str) -> Iterator[None]:
    """A fault that is not transient fails the run with the reason, at once (a transient
    one is retried; when its retries run out, the task's on_failure fails the run)."""
    try:
        yield
    except TRANSIENT:
        raise
    except Exception as exc:
        fail(f"{what}: {reason_of(exc)}")
        raise


def reason_of(exc: BaseException) -> str:
    """The exception as a run shows it: its type and the first line of its message
    (a database error's next lines quote the SQL)."""
    lines = str(exc).splitlines()
    return f"{type(exc).__name__}: {lines[0] if lines else ''}"


@shared_task(base=StartTask, **TASK_OPTIONS)
def start_evaluation(evaluation_id: int) -> None:
    """Plan a queued run in chunks and send one task per chunk."""
    with failing_the_run_for_good(partial(evaluations.fail_run, evaluation_id), "the run could not start"):
        evaluations.start_run(evaluation_id)


@shared_task(base=ChunkTask, **TASK_OPTIONS)
def evaluate_chunk(chunk_id: int) -> None:
    """Evaluate one chunk of a run; the last chunk to finish finishes the run."""
    with failing_the_run_for_good(partial(evaluations.fail_run_of_chunk, chunk_id), "a chunk failed"):
        evaluations.evaluate_chunk(chunk_id)


@shared_task(**TASK_OPTIONS)
def evaluate_ingested(trace_ids: Sequence[int], pending_id: int | None = None) -> None:
    """Runtime-mode evaluation of one ingested batch (the traces that are still there),
    then out of the outbox (`pending_id`)."""
    services.evaluate_stored_traces(trace_ids)
    outbox.done(pending_id)


class UploadTask(Task):  # type: ignore[misc]
    """An upload whose piece fails for good (not a transient fault) fails, with the reason."""

    def on_failure(self, exc: BaseException, task_id: str, args: Any, kwargs: Any, einfo: Any) -> None:
        upload_id = args[0] if args else kwargs.get("upload_id")
        uploads.fail_upload(upload_id, f"{type(exc).__name__}: {exc}")


@shared_task(base=UploadTask, **TASK_OPTIONS)
def process_upload(upload_id: int) -> None:
    """Read the next piece of an uploaded file of traces, storing its good lines in batches."""
    uploads.process_upload(upload_id)


@shared_task(**TASK_OPTIONS)
def complete_waiting_otlp_turns() -> int:
    """Store the OTLP turns whose agent span has not come in time, marked incomplete (beat runs this)."""
    return otlp_turns.complete_waiting()


@shared_task(**TASK_OPTIONS)
def requeue_expired_work(lost_before: str | None = None) -> int:
    """Send again the work of every leased kind whose worker or message was lost: each
    registered recoverer (`kindgi_console.jobs.recover_all`: runs and their chunks,
    uploads, runtime evaluations, alert deliveries). Beat runs this periodically; its
    name is kept from when it sent chunks only, so that queued messages still route.

    `lost_before` (an ISO time; a worker that connected to the broker again sends it):
    also the queued work sent before then. When the broker lost what it held (a Redis
    restarted without persistence), all the queued work sent before now.
    """
    before = datetime.fromisoformat(lost_before) if lost_before else None
    if leases.broker_lost_its_messages():
        before = timezone.now()
        logger.warning("the broker lost the messages it held: the work they were sending is sent again")
    return sum(jobs.recover_all(before).values())


@worker_ready.connect
def beat_while_running(sender: Any = None, **_: Any) -> None:
    """The worker's heartbeat row, which pages of waiting work read."""
    heartbeat.start(getattr(sender, "hostname", None) or f"worker-{os.getpid()}")


@worker_shutdown.connect
def stop_beating(**_: Any) -> None:
    heartbeat.stop()


@shared_task(**TASK_OPTIONS)
def apply_retention() -> int:
    """Delete what tenants' retention policies no longer keep (beat runs this periodically)."""
    return retention.apply_retention()


@worker_ready.connect
def recover_on_worker_start(**_: Any) -> None:
    """A new worker looks for work a lost worker held: now, and once every lease has run out.

    The filesystem transport of the embedded default does not deliver an unacknowledged
    message again, and Redis only after its visibility timeout; the chunk leases recover
    both without waiting for either.
    """
    try:
        requeue_expired_work.delay()
        requeue_expired_work.apply_async(countdown=settings.KINDGI_CHUNK_LEASE_SECONDS + 1)
    except TRANSIENT:
        logger.exception("could not send the recovery check; the periodic check will run it")


@shared_task(**TASK_OPTIONS)
def run_preview(preview_id: int) -> None:
    """Evaluate a guardrail draft beside its current revision (traces.previews)."""
    from traces import previews

    previews.run_preview(preview_id)


class CompareTask(Task):  # type: ignore[misc]
    """A comparison that fails for good (not a transient fault) fails, with the reason; it is
    sent again when next asked for."""

    def on_failure(self, exc: BaseException, task_id: str, args: Any, kwargs: Any, einfo: Any) -> None:
        from traces import comparisons

        comparison_id = args[0] if args else kwargs.get("comparison_id")
        comparisons.fail(comparison_id, reason_of(exc))


@shared_task(base=CompareTask, **TASK_OPTIONS)
def compare_runs(comparison_id: int) -> None:
    """Compare two finished runs per shared guardrail, keeping the figures (traces.comparisons)."""
    from traces import comparisons

    comparisons.compute(comparison_id)
