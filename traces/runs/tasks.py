"""Background work of evaluation runs: planning a run, its chunks, a draft's preview, two runs
compared, and the recovery check that sends again the work a lost worker held.

Thin shells around `traces.runs`: each task takes primary keys, re-reads its rows (a row that
has gone is nothing to do), keeps its state in those rows, and is safe to run twice. The
registered names are `traces.tasks.*` (kindgi_console.tasking).
"""

from __future__ import annotations

import logging
from datetime import datetime
from functools import partial
from typing import Any

from celery import Task, shared_task
from celery.signals import worker_ready
from django.conf import settings
from django.utils import timezone

from kindgi_console import jobs
from kindgi_console.tasking import TASK_OPTIONS, TRANSIENT, failing_for_good, reason_of
from traces.runs import chunks, comparing, previews, run_ends
from traces.store import leases

logger = logging.getLogger(__name__)


class ChunkTask(Task):  # type: ignore[misc]
    """A chunk that fails for good (not a transient fault) fails its run, with the reason."""

    def on_failure(self, exc: BaseException, task_id: str, args: Any, kwargs: Any, einfo: Any) -> None:
        chunk_id = args[0] if args else kwargs.get("chunk_id")
        run_ends.fail_run_of_chunk(chunk_id, f"a chunk failed: {reason_of(exc)}")


class StartTask(Task):  # type: ignore[misc]
    """A run that cannot be planned for good (not a transient fault) fails, with the reason;
    it does not stay `queued` to be sent again by every recovery check."""

    def on_failure(self, exc: BaseException, task_id: str, args: Any, kwargs: Any, einfo: Any) -> None:
        evaluation_id = args[0] if args else kwargs.get("evaluation_id")
        run_ends.fail_run(evaluation_id, f"the run could not start: {reason_of(exc)}")


@shared_task(name="traces.tasks.start_evaluation", base=StartTask, **TASK_OPTIONS)
def start_evaluation(evaluation_id: int) -> None:
    """Plan a queued run in chunks and send one task per chunk."""
    with failing_for_good(partial(run_ends.fail_run, evaluation_id), "the run could not start"):
        chunks.start_run(evaluation_id)


@shared_task(name="traces.tasks.evaluate_chunk", base=ChunkTask, **TASK_OPTIONS)
def evaluate_chunk(chunk_id: int) -> None:
    """Evaluate one chunk of a run; the last chunk to finish finishes the run."""
    with failing_for_good(partial(run_ends.fail_run_of_chunk, chunk_id), "a chunk failed"):
        chunks.evaluate_chunk(chunk_id)


@shared_task(name="traces.tasks.requeue_expired_work", **TASK_OPTIONS)
def requeue_expired_work(lost_before: str | None = None) -> int:
    """Send again the work of every leased kind whose worker or message was lost: each
    registered recoverer (`kindgi_console.jobs.recover_all`: runs and their chunks,
    uploads, runtime evaluations, alert deliveries). Beat runs this periodically.

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


@shared_task(name="traces.tasks.run_preview", **TASK_OPTIONS)
def run_preview(preview_id: int) -> None:
    """Evaluate a guardrail draft beside its current revision (traces.runs.previews)."""
    previews.run_preview(preview_id)


class CompareTask(Task):  # type: ignore[misc]
    """A comparison that fails for good (not a transient fault) fails, with the reason; it is
    sent again when next asked for."""

    def on_failure(self, exc: BaseException, task_id: str, args: Any, kwargs: Any, einfo: Any) -> None:
        comparison_id = args[0] if args else kwargs.get("comparison_id")
        comparing.fail(comparison_id, reason_of(exc))


@shared_task(name="traces.tasks.compare_runs", base=CompareTask, **TASK_OPTIONS)
def compare_runs(comparison_id: int) -> None:
    """Compare a finished run with earlier results, keeping the figures (traces.runs.comparing)."""
    comparing.compute(comparison_id)
