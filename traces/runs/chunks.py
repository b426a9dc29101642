"""A run's chunks: planning a queued run into chunks, evaluating one chunk until its time runs
out (handing back the rest), completing it, and the recovery check that sends again what a
lost worker held (the runs' recoverer, `kindgi_console.jobs`). The tasks
(`traces.runs.tasks`) call these.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, cast

from celery import current_app
from celery.exceptions import SoftTimeLimitExceeded
from django.conf import settings
from django.db import transaction
from django.db.models import Avg, Count, F, Max, Q
from django.utils import timezone
from kombu.exceptions import OperationalError as TRANSIENT_BROKER_ERRORS

from guardrails.deployment import engine as deployment_engine
from guardrails.engine.judge import KIND as JUDGE_KIND
from guardrails.engine.types import Mode
from guardrails.services import Enforced, engine_guardrail
from kindgi_console import jobs, tasking
from traces.judge.services import evaluation_services
from traces.models import Evaluation, EvaluationChunk, JudgeLedgerEntry
from traces.runs import judging
from traces.runs.evaluations import run_traces, send_start
from traces.runs.run_ends import STATUSES as STATUSES
from traces.runs.run_ends import cancel_run as cancel_run
from traces.runs.run_ends import count_done, finish_run
from traces.runs.run_ends import fail_run as fail_run
from traces.runs.run_ends import fail_run_of_chunk as fail_run_of_chunk
from traces.runs.run_ends import live_summary as live_summary
from traces.store import bulk, leases
from traces.store.leases import LeaseKeeper as LeaseKeeper
from traces.store.leases import chunk_lease as chunk_lease
from traces.store.leases import lease as lease

logger = logging.getLogger(__name__)


logger = logging.getLogger(__name__)


def send_chunk(chunk_id: int) -> None:
    tasking.send("traces.tasks.evaluate_chunk", chunk_id)


# ---------------------------------------------------------------------------- planning


def start_run(evaluation_id: int) -> None:
    """Plan a queued run in chunks and send them; a run already planned is left alone."""
    with transaction.atomic():
        run = Evaluation.objects.select_for_update().filter(pk=evaluation_id).first()
        if run is None or run.status != Evaluation.Status.QUEUED:
            return
        chunks = list(plan_chunks(run))
        EvaluationChunk.objects.bulk_create(chunks, batch_size=500)
        run.total = sum(chunk.size for chunk in chunks)
        run.status = Evaluation.Status.RUNNING
        run.started_at = timezone.now()
        run.save(update_fields=["total", "status", "started_at"])
    if not chunks:
        finish_run(evaluation_id)
        return
    for chunk_id in EvaluationChunk.objects.filter(evaluation_id=evaluation_id).values_list("pk", flat=True):
        send_chunk(chunk_id)


def plan_chunks(run: Evaluation) -> Iterator[EvaluationChunk]:
    """Chunks of at most `chunk_size` selected traces, by ranges of primary key.

    Only the keys are read (streamed), so planning 100,000 traces holds 100,000 integers
    at most one database page at a time.
    """
    size = chunk_size(run)
    expires = timezone.now() + lease()
    keys = run_traces(run).order_by("pk").values_list("pk", flat=True).iterator(chunk_size=5000)
    number, first, last, count = 0, None, None, 0
    for pk in keys:
        if first is None:
            first = pk
        last, count = pk, count + 1
        if count == size:
            yield _chunk(run, number, first, last, count, expires)
            number, first, count = number + 1, None, 0
    if first is not None and last is not None:
        yield _chunk(run, number, first, last, count, expires)


def chunk_size(run: Evaluation) -> int:
    """Traces per chunk: KINDGI_EVALUATION_CHUNK_SIZE, or fewer when the run judges, so that
    a chunk's estimated time is half of KINDGI_CHUNK_SECONDS (a check takes microseconds, a
    judge call a tenth of a second or more).

    A judge call is estimated at the mean latency of the guardrails' last calls in the
    ledger, or KINDGI_JUDGE_CALL_ESTIMATE_MS before any; KINDGI_JUDGE_CONCURRENCY of them
    run at once. A chunk that takes longer all the same hands the rest back (`hand_back`).
    """
    size = int(settings.KINDGI_EVALUATION_CHUNK_SIZE)
    judged = [
        revision.guardrail_id
        for revision in run.revisions.select_related("guardrail")
        if revision.guardrail.kind == JUDGE_KIND
    ]
    if not judged:
        return size
    recent = JudgeLedgerEntry.objects.filter(guardrail_id__in=judged, cache_hit=False).order_by("-created_at")
    latency = recent[:200].aggregate(mean=Avg("latency_ms"))["mean"]
    call_s = (latency if latency is not None else settings.KINDGI_JUDGE_CALL_ESTIMATE_MS) / 1000
    per_trace_s = max(call_s, 0.001) * len(judged) / max(1, settings.KINDGI_JUDGE_CONCURRENCY)
    return max(1, min(size, int(settings.KINDGI_CHUNK_SECONDS / 2 / per_trace_s)))


def _chunk(run: Evaluation, number: int, first: int, last: int, size: int, expires: datetime) -> EvaluationChunk:
    return EvaluationChunk(evaluation=run, number=number, first_pk=first, last_pk=last, size=size, lease_until=expires)


# ---------------------------------------------------------------------------- one chunk


def evaluate_chunk(chunk_id: int) -> bool:
    """Evaluate one chunk's traces against the run's pinned revisions; True when it finished
    or handed the rest of its traces back.

    A chunk that is gone, done, cancelled or held by a live lease is left alone. Its lease
    is renewed by a heartbeat while it runs (`LeaseKeeper`), so a short lease tells a lost
    worker in seconds; a batch is written only while the run is still running. A chunk
    stops after KINDGI_CHUNK_SECONDS (or at the task's soft time limit), keeps what it
    stored and hands the rest back as a new chunk (`hand_back`): no run fails by its size.
    """
    with bulk.commits_without_waiting_for_disk(), bulk.without_cycle_collection():
        return _evaluate_chunk(chunk_id)


def _evaluate_chunk(chunk_id: int) -> bool:
    started = time.monotonic()
    chunk = claim_chunk(chunk_id)
    if chunk is None:
        return False
    run = chunk.evaluation
    targets = run_targets(run)
    deadline = ChunkDeadline(
        stop_at=started + settings.KINDGI_CHUNK_SECONDS, judge_until=started + settings.CELERY_TASK_SOFT_TIME_LIMIT
    )
    traces = run_traces(run).filter(pk__gte=chunk.first_pk, pk__lte=chunk.last_pk)
    reached, last_stored = 0, None
    pool = judging.pool_for(targets, settings.KINDGI_JUDGE_CONCURRENCY)
    try:
        with LeaseKeeper(chunk.pk):
            for batch in bulk.stored_traces(traces, settings.KINDGI_EVALUATION_BATCH):
                if last_stored is not None and time.monotonic() >= deadline.stop_at:
                    return hand_back(chunk, reached, last_stored)
                evaluated = evaluate_batch(
                    run,
                    targets,
                    batch,
                    fresh=chunk.attempts == 1,
                    chunk=chunk,
                    reached=reached,
                    deadline=deadline,
                    pool=pool,
                )
                if evaluated is None:
                    return False  # the run was cancelled or failed: this batch wrote nothing
                reached, last_stored = reached + evaluated, batch[evaluated - 1].pk
                if evaluated < len(batch) or deadline.stopped:
                    return hand_back(chunk, reached, last_stored)
                if reached < chunk.size:  # the last batch is counted as the chunk completes, at once
                    count_progress(chunk, reached)
    except SoftTimeLimitExceeded:
        # Between batches (a judged batch stops by itself): what was stored is kept.
        if last_stored is None:
            raise
        return hand_back(chunk, reached, last_stored)
    finally:
        if pool is not None:
            pool.close()
    return complete_chunk(chunk)


@dataclass
class ChunkDeadline:
    """When a chunk stops evaluating (`stop_at`) and when its judge calls must have ended
    (`judge_until`), as time.monotonic() instants; `stopped` once a batch stopped early."""

    stop_at: float
    judge_until: float
    stopped: bool = False


def count_progress(chunk: EvaluationChunk, reached: int, *, finished: bool = False) -> bool:
    """Raise the chunk's `progress` to `reached` traces (at most its size) and the run's
    `done` to what its chunks have counted; with `finished`, also mark the chunk done.

    Only a running chunk counts, and `progress` never goes down: a chunk redone after its
    worker was lost adds only the traces that worker had not counted, so `done` is exact.
    (Each stored batch has already raised its chunk's `progress`, in its own transaction:
    `bulk.store_rows`.) The run's row, then the chunk's, are locked for the moment of the
    update (the order `stop_run` takes them in, so neither waits for the other in a
    circle); other chunks of the run go on evaluating meanwhile.
    """
    with transaction.atomic():
        list(Evaluation.objects.select_for_update(no_key=True).filter(pk=chunk.evaluation_id).values_list("pk"))
        row = (
            EvaluationChunk.objects.select_for_update()
            .filter(pk=chunk.pk, status=EvaluationChunk.Status.RUNNING)
            .values("progress", "size")
            .first()
        )
        if row is None:
            return False
        progress = min(row["size"], max(row["progress"], reached))
        changes: dict[str, Any] = {"progress": progress}
        if finished:
            changes.update(status=EvaluationChunk.Status.SUCCEEDED, finished_at=timezone.now(), lease_until=None)
        EvaluationChunk.objects.filter(pk=chunk.pk).update(**changes)
        count_done(chunk.evaluation_id)
    return True


def hand_back(chunk: EvaluationChunk, reached: int, last_stored: int) -> bool:
    """A chunk out of time keeps the `reached` traces it stored, up to `last_stored` (its
    range ends there, it is done), and hands the rest of its range back as a new queued
    chunk, sent once this commits: the sizes and progress of the two add up to the old
    chunk's, so the run's `total` and `done` stay as they were. False when the run or the
    chunk is no longer running (cancelled meanwhile): nothing is handed back."""
    with transaction.atomic():
        live = (
            Evaluation.objects.select_for_update(no_key=True)
            .filter(pk=chunk.evaluation_id, status=Evaluation.Status.RUNNING)
            .values_list("pk", flat=True)
        )
        row = (
            EvaluationChunk.objects.select_for_update()
            .filter(pk=chunk.pk, status=EvaluationChunk.Status.RUNNING)
            .values("progress", "size", "last_pk")
            .first()
        )
        if not list(live) or row is None:
            return False
        rest = row["size"] - reached
        finished = rest <= 0 or last_stored >= row["last_pk"]
        if not finished:
            handed = _handed_back(chunk, reached, last_stored, row)
    if finished:  # nothing was left after all
        return complete_chunk(chunk)
    logger.info("chunk %s ran out of time: %s traces handed back as chunk %s", chunk.pk, rest, handed.number)
    return True


def _handed_back(chunk: EvaluationChunk, reached: int, last_stored: int, row: Mapping[str, Any]) -> EvaluationChunk:
    """The new chunk of what `chunk` (locked, with its `row`) hands back; sent once this commits.

    A chunk redone after a lost worker may have counted more than this attempt reached:
    the new chunk starts with that excess counted, as the traces it covers are stored.
    """
    number = EvaluationChunk.objects.filter(evaluation_id=chunk.evaluation_id).aggregate(n=Max("number"))["n"]
    handed = EvaluationChunk.objects.create(
        evaluation_id=chunk.evaluation_id,
        number=number + 1,
        first_pk=last_stored + 1,
        last_pk=row["last_pk"],
        size=row["size"] - reached,
        progress=row["progress"] - reached,
        lease_until=timezone.now() + lease(),
    )
    EvaluationChunk.objects.filter(pk=chunk.pk).update(
        last_pk=last_stored,
        size=reached,
        progress=reached,
        status=EvaluationChunk.Status.SUCCEEDED,
        finished_at=timezone.now(),
        lease_until=None,
    )
    transaction.on_commit(lambda: send_chunk(handed.pk))
    return handed


def claim_chunk(chunk_id: int) -> EvaluationChunk | None:
    """Take a queued chunk, or a running one whose lease expired, for this worker.

    A chunk tried KINDGI_CHUNK_MAX_ATTEMPTS times (each attempt lost its worker) fails
    its run instead of killing workers forever.
    """
    live_runs = Evaluation.objects.filter(status=Evaluation.Status.RUNNING).values("pk")
    if not jobs.claim(EvaluationChunk.objects.filter(pk=chunk_id, evaluation_id__in=live_runs), lease=chunk_lease()):
        return None
    chunk = EvaluationChunk.objects.select_related("evaluation__tenant").get(pk=chunk_id)
    if jobs.exhausted(chunk.attempts, settings.KINDGI_CHUNK_MAX_ATTEMPTS):
        fail_run(
            chunk.evaluation_id,
            f"chunk {chunk.number} was tried {chunk.attempts - 1} times "
            "and never finished (its worker was lost each time)",
        )
        return None
    return chunk


def run_targets(run: Evaluation) -> list[Enforced]:
    """The run's pinned revisions as the engine reads them. Of a guardrail pinned at two
    revisions (in shadow beside an enforced one when the run was made), the newer is the
    shadow one; a guardrail pinned once follows the guardrail's shadow state."""
    revisions = list(run.revisions.select_related("guardrail").order_by("guardrail__guardrail_id", "number"))
    newest: dict[int, int] = {}
    pinned: dict[int, int] = {}
    for revision in revisions:
        newest[revision.guardrail_id] = revision.number
        pinned[revision.guardrail_id] = pinned.get(revision.guardrail_id, 0) + 1
    return [
        Enforced(
            engine_guardrail(revision),
            revision,
            in_shadow=None if pinned[revision.guardrail_id] == 1 else revision.number == newest[revision.guardrail_id],
        )
        for revision in revisions
    ]


def evaluate_batch(
    run: Evaluation,
    targets: Sequence[Enforced],
    traces: Sequence[bulk.StoredTrace],
    *,
    fresh: bool = False,
    chunk: EvaluationChunk | None = None,
    reached: int = 0,
    deadline: ChunkDeadline | None = None,
    pool: judging.JudgingPool | None = None,
) -> int | None:
    """Evaluate and store one batch of traces in bulk (nothing stored twice): how many of
    them (the first ones) were evaluated and stored, and None when the run is no longer
    running and nothing was stored. `fresh`: the chunk's first attempt.

    With `chunk`, its `progress` rises to `reached` plus this batch's traces in the
    transaction that stores them. With `deadline`, a judged batch stops at its `stop_at`
    (`traces.runs.judging`): fewer than all were evaluated, and `deadline.stopped` is set.
    """
    engine = deployment_engine()
    deadline = deadline or ChunkDeadline(
        stop_at=float("inf"), judge_until=time.monotonic() + settings.CELERY_TASK_SOFT_TIME_LIMIT
    )
    # One judge client and ledger per batch; its calls end by the chunk's judge deadline.
    with evaluation_services(run.tenant, evaluation=run, until=deadline.judge_until) as services:
        if judging.judges(targets):
            services.know_traces(traces)
        rows, evaluated, stopped = judging.evaluate_until(
            engine, targets, traces, cast(Mode, run.mode), run.pk, services, stop_at=deadline.stop_at, pool=pool
        )
    deadline.stopped = deadline.stopped or stopped
    progress = None if chunk is None else (chunk.pk, reached + evaluated)
    if not bulk.store_rows(rows, while_running=run.pk, fresh=fresh, progress=progress):
        return None
    return evaluated


def complete_chunk(chunk: EvaluationChunk) -> bool:
    """Mark the chunk done and count the traces not counted yet; finish the run after its
    last chunk.

    When the chunks left are all held by other workers, a recovery check is scheduled for
    when their leases would have run out: a worker lost at the end of a run is noticed
    then, without waiting for the periodic check.
    """
    if not count_progress(chunk, chunk.size, finished=True):
        return False
    left = (
        EvaluationChunk.objects.filter(evaluation_id=chunk.evaluation_id)
        .exclude(status=EvaluationChunk.Status.SUCCEEDED)
        .aggregate(n=Count("pk"), last_queued=Max("number", filter=Q(status=EvaluationChunk.Status.QUEUED)))
    )
    if not left["n"]:
        finish_run(chunk.evaluation_id)
    elif left["last_queued"] is None or left["last_queued"] < chunk.number:
        # Nothing after this chunk is waiting: what is left is held by other workers, or
        # its message was lost with one (see `leases.overtaken_chunks`).
        send_recovery_check(countdown=settings.KINDGI_CHUNK_LEASE_SECONDS + 1)
    return True


def _chunks_left(evaluation_id: int) -> bool:
    return (
        EvaluationChunk.objects.filter(evaluation_id=evaluation_id)
        .exclude(status=EvaluationChunk.Status.SUCCEEDED)
        .exists()
    )


def send_recovery_check(countdown: float) -> None:
    """Run the recovery check in `countdown` seconds (not when tasks run in this process:
    the check would run at once, before any lease could expire)."""
    if current_app.conf.task_always_eager:
        return
    try:
        tasking.send("traces.tasks.requeue_expired_work", countdown=countdown)
    except TRANSIENT_BROKER_ERRORS:
        logger.warning("could not schedule the recovery check; the periodic check will run it")


# ---------------------------------------------------------------------------- recovery


@jobs.recoverer("evaluation runs")
def requeue_expired_work(lost_before: datetime | None = None) -> int:
    """Send again what a lost worker held: chunks whose lease expired or whose message was
    overtaken, runs never planned, runs whose last chunk finished without finishing the run.
    Returns how many were sent.

    `lost_before`: the broker may have lost every message sent before then; queued chunks
    and runs sent before it are sent again at once (a second message for the same work
    finds it taken, and does nothing).
    """
    now = timezone.now()
    lost_before = None if lost_before is None else min(lost_before, now)
    sent = jobs.requeue_expired(
        leases.chunks_of_running_runs(),
        lease=lease(),
        send=send_chunk,
        now=now,
        lost_before=lost_before,
        also=leases.overtaken_chunks(now),
    )
    stale = now - lease() if lost_before is None else max(now - lease(), lost_before)
    for evaluation_id in Evaluation.objects.filter(status=Evaluation.Status.QUEUED, created_at__lt=stale).values_list(
        "pk", flat=True
    ):
        send_start(evaluation_id)
        sent += 1
    finished = Evaluation.objects.filter(status=Evaluation.Status.RUNNING, total__gt=0, done__gte=F("total"))
    for evaluation_id in finished.values_list("pk", flat=True):
        if not _chunks_left(evaluation_id):
            finish_run(evaluation_id)
    return sent
