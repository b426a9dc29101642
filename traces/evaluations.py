"""Evaluation runs: create, plan in chunks, evaluate a chunk, finish, cancel, recover.

Plain functions that the API, the pages and the Celery tasks (`traces.tasks`) all call.
A run's state lives in its rows: `Evaluation` (status, done / total, summary) and its
`EvaluationChunk`s (a range of trace primary keys each, with a status and a lease).

Why it survives a lost worker: results are unique per trace, revision and run, so a chunk
evaluated twice stores nothing twice; a chunk's `progress` only grows, up to its size, and
the run's `done` grows by exactly as much (`count_progress`, per stored batch and when the
chunk is done), so a chunk redone after a lost worker counts each trace once; and a
chunk whose lease expired (its worker died, or its message was lost with the worker) is
sent again by `requeue_expired_work`, which runs when a worker starts and periodically.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Any, cast

from django.conf import settings
from django.db import transaction
from django.db.models import Count, F, Max, Q, QuerySet
from django.utils import timezone
from kombu.exceptions import OperationalError as TRANSIENT_BROKER_ERRORS

from guardrails.deployment import engine as deployment_engine
from guardrails.engine.judge import KIND as JUDGE_KIND
from guardrails.engine.types import Guardrail as EngineGuardrail
from guardrails.engine.types import Issue, IssuesError, Mode
from guardrails.models import Guardrail, GuardrailRevision
from guardrails.services import Enforced, engine_guardrail
from kindgi_console.tenancy.models import Tenant
from traces import bulk
from traces.filters import SELECTION_ERRORS, RunTraceFilter, run_selection, selection_filters, selection_issues
from traces.judge.services import evaluation_services
from traces.leases import LeaseKeeper as LeaseKeeper
from traces.leases import chunk_lease as chunk_lease
from traces.leases import lease as lease
from traces.leases import lost_chunks
from traces.models import Evaluation, EvaluationChunk, RunTrace
from traces.run_ends import STATUSES as STATUSES
from traces.run_ends import cancel_run as cancel_run
from traces.run_ends import fail_run as fail_run
from traces.run_ends import fail_run_of_chunk as fail_run_of_chunk
from traces.run_ends import finish_run
from traces.run_ends import live_summary as live_summary

logger = logging.getLogger(__name__)

FILTER_NAMES = ("agent", "flow", "since", "until", "upload")


class RunRequestError(IssuesError):
    """A run that cannot start as asked; each issue names the field (JSON pointer).

    `status` is 400 for a bad request, 403 for a run only an author may start.
    """


# ---------------------------------------------------------------------------- creating a run


@dataclass(frozen=True)
class RunRequest:
    """What a person or an API key asks for: guardrails (none: every enabled one), filters."""

    tenant: Tenant
    guardrails: Sequence[str] = ()
    filters: dict[str, Any] | None = None
    mode: Mode = "ci"
    started_by: Any = None
    label: str = ""
    #: False for a reviewer: a run whose judge estimate is over the tenant's limit is refused.
    by_author: bool = True


def pinned_revisions(guardrail_ids: Sequence[str], tenant: Tenant) -> list[GuardrailRevision]:
    """The current revision of each named guardrail, or of every enabled one, among those
    that apply to the run's tenant (console-wide, or its own: never another tenant's).

    Raises RunRequestError naming an id that is no (live) guardrail of the tenant.
    """
    for index, guardrail_id in enumerate(guardrail_ids):
        if "\x00" in guardrail_id:  # PostgreSQL cannot compare it: a 400, not a 500
            raise RunRequestError([Issue(f"/guardrails/{index}", "the NUL character is not allowed")])
    revisions = (
        GuardrailRevision.objects.filter(
            guardrail__deleted_at__isnull=True,
            number=F("guardrail__revision"),
            guardrail__in=Guardrail.objects.applying_to(tenant.pk),
        )
        .select_related("guardrail")
        .order_by("guardrail__guardrail_id")
    )
    if not guardrail_ids:
        return list(revisions.filter(guardrail__enabled=True))
    found = list(revisions.filter(guardrail__guardrail_id__in=list(guardrail_ids)))
    known = {revision.guardrail.guardrail_id for revision in found}
    for index, guardrail_id in enumerate(guardrail_ids):
        if guardrail_id not in known:
            raise RunRequestError([Issue(f"/guardrails/{index}", f"there is no guardrail {guardrail_id!r}")])
    return found


def clean_filters(raw: object, tenant: Tenant) -> dict[str, Any]:
    """The trace selection, checked: the JSON types here, the values by the FilterSet a run
    selects with (`traces.filters.run_selection`), as on the new-run page."""
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise RunRequestError([Issue("/filters", "filters is an object")])
    unknown = sorted(set(raw) - set(FILTER_NAMES))
    if unknown:
        raise RunRequestError([Issue(f"/filters/{unknown[0]}", f"unknown filter; use {', '.join(FILTER_NAMES)}")])
    mistyped = [name for name, value in raw.items() if value not in (None, "") and not _json_type_fits(name, value)]
    if mistyped:
        raise RunRequestError([Issue(f"/filters/{name}", SELECTION_ERRORS[name]) for name in mistyped])
    selection = run_selection(raw, tenant)
    if not selection.is_valid():
        raise RunRequestError(selection_issues(selection, "/filters"))
    return selection_filters(selection)


def _json_type_fits(name: str, value: object) -> bool:
    if name == "upload":
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, str)


def create_run(request: RunRequest) -> Evaluation:
    """Record a queued run with its revisions pinned; it starts once the transaction commits."""
    if request.mode not in ("ci", "runtime"):
        raise RunRequestError([Issue("/mode", "mode is ci or runtime")])
    revisions = pinned_revisions(request.guardrails, request.tenant)
    if not revisions:
        raise RunRequestError([Issue("/guardrails", "no guardrail is enabled: name the ones to evaluate")])
    filters = clean_filters(request.filters, request.tenant)
    if not request.by_author:
        check_reviewer_limit(request.tenant, [r.document for r in revisions], filters, request.mode)
    with transaction.atomic():
        run = Evaluation.objects.create(
            tenant=request.tenant,
            guardrails=[revision.guardrail.guardrail_id for revision in revisions],
            trace_filters=filters,
            mode=request.mode,
            started_by=request.started_by,
            started_by_label=request.label,
        )
        run.revisions.set(revisions)
        transaction.on_commit(lambda: send_start(run.pk))
    return run


def reviewer_limit_exceeded(tenant: Tenant, estimate: dict[str, Any] | None) -> str | None:
    """Why a reviewer may not start a run of this judge estimate (None: they may)."""
    if not estimate:
        return None
    cost = Decimal(str(estimate.get("costUsd") or "0"))
    limit = tenant.reviewer_judge_limit_usd
    if cost <= limit:
        return None
    return (
        f"its llm-judge calls are estimated at ${cost:.2f}, above this tenant's ${limit:.2f} "
        "for a reviewer's run: an author of the tenant starts it"
    )


def check_reviewer_limit(tenant: Tenant, documents: Sequence[Any], filters: dict[str, Any], mode: Mode) -> None:
    """Raise RunRequestError (403) when the judge estimate is over the tenant's reviewer limit."""
    from traces.judge.estimate import estimate_run

    guardrails = [EngineGuardrail(document=document) for document in documents]
    estimate = estimate_run(guardrails, selected_traces(tenant.pk, filters), tenant, mode=mode)
    why = reviewer_limit_exceeded(tenant, estimate)
    if why is not None:
        raise RunRequestError([Issue("/guardrails", why)], status=403)


def send_start(evaluation_id: int) -> None:
    from traces.tasks import start_evaluation

    start_evaluation.delay(evaluation_id)


def send_chunk(chunk_id: int) -> None:
    from traces.tasks import evaluate_chunk

    evaluate_chunk.delay(chunk_id)


# ---------------------------------------------------------------------------- selection


def selected_traces(tenant_id: int, filters: dict[str, Any]) -> QuerySet[RunTrace]:
    """The tenant's traces that a run's filters (checked by `clean_filters`) select: the
    FilterSet of `GET traces`, with the upload, so that a run selects what the list shows."""
    data = {name: str(value) for name, value in filters.items() if value not in (None, "")}
    selection = RunTraceFilter(data=data, queryset=RunTrace.objects.filter(tenant_id=tenant_id))
    if not selection.is_valid():
        raise ValueError(f"a run's filters that clean_filters did not write: {selection.form.errors.as_json()}")
    return selection.qs


def run_traces(run: Evaluation) -> QuerySet[RunTrace]:
    return selected_traces(run.tenant_id, run.trace_filters)


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
    """Chunks of at most KINDGI_EVALUATION_CHUNK_SIZE selected traces, by ranges of primary key.

    Only the keys are read (streamed), so planning 100,000 traces holds 100,000 integers
    at most one database page at a time.
    """
    size = settings.KINDGI_EVALUATION_CHUNK_SIZE
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


def _chunk(run: Evaluation, number: int, first: int, last: int, size: int, expires: datetime) -> EvaluationChunk:
    return EvaluationChunk(evaluation=run, number=number, first_pk=first, last_pk=last, size=size, lease_until=expires)


# ---------------------------------------------------------------------------- one chunk


def evaluate_chunk(chunk_id: int) -> bool:
    """Evaluate one chunk's traces against the run's pinned revisions; True when it finished.

    A chunk that is gone, done, cancelled or held by a live lease is left alone. Its lease
    is renewed by a heartbeat while it runs (`LeaseKeeper`), so a short lease tells a lost
    worker in seconds; a batch is written only while the run is still running.
    """
    with bulk.commits_without_waiting_for_disk(), bulk.without_cycle_collection():
        return _evaluate_chunk(chunk_id)


def _evaluate_chunk(chunk_id: int) -> bool:
    chunk = claim_chunk(chunk_id)
    if chunk is None:
        return False
    run = chunk.evaluation
    targets = run_targets(run)
    traces = run_traces(run).filter(pk__gte=chunk.first_pk, pk__lte=chunk.last_pk)
    reached = 0
    with LeaseKeeper(chunk.pk):
        for batch in bulk.stored_traces(traces, settings.KINDGI_EVALUATION_BATCH):
            if not evaluate_batch(run, targets, batch, fresh=chunk.attempts == 1):
                return False  # the run was cancelled or failed: this batch wrote nothing
            reached += len(batch)
            if reached < chunk.size:  # the last batch is counted as the chunk completes, at once
                count_progress(chunk, reached)
    return complete_chunk(chunk)


def count_progress(chunk: EvaluationChunk, reached: int, *, finished: bool = False) -> bool:
    """Raise the chunk's `progress` to `reached` traces (at most its size) and the run's
    `done` by the same amount; with `finished`, also mark the chunk done.

    Only a running chunk counts, and `progress` never goes down: a chunk redone after its
    worker was lost adds only the traces that worker had not counted, so `done` is exact.
    The run's row, then the chunk's, are locked for the moment of the update (the order
    `stop_run` takes them in, so neither waits for the other in a circle); other chunks
    of the run go on evaluating meanwhile.
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
            changes.update(status=EvaluationChunk.Status.DONE, finished_at=timezone.now(), lease_until=None)
        EvaluationChunk.objects.filter(pk=chunk.pk).update(**changes)
        if progress > row["progress"]:
            Evaluation.objects.filter(pk=chunk.evaluation_id).update(done=F("done") + progress - row["progress"])
    return True


def claim_chunk(chunk_id: int) -> EvaluationChunk | None:
    """Take a queued chunk, or a running one whose lease expired, for this worker.

    A chunk tried KINDGI_CHUNK_MAX_ATTEMPTS times (each attempt lost its worker) fails
    its run instead of killing workers forever.
    """
    now = timezone.now()
    claimable = Q(status=EvaluationChunk.Status.QUEUED) | Q(status=EvaluationChunk.Status.RUNNING, lease_until__lt=now)
    live_runs = Evaluation.objects.filter(status=Evaluation.Status.RUNNING).values("pk")
    claimed = EvaluationChunk.objects.filter(claimable, pk=chunk_id, evaluation_id__in=live_runs).update(
        status=EvaluationChunk.Status.RUNNING, lease_until=now + chunk_lease(), attempts=F("attempts") + 1
    )
    if not claimed:
        return None
    chunk = EvaluationChunk.objects.select_related("evaluation__tenant").get(pk=chunk_id)
    if chunk.attempts > settings.KINDGI_CHUNK_MAX_ATTEMPTS:
        fail_run(
            chunk.evaluation_id,
            f"chunk {chunk.number} was tried {chunk.attempts - 1} times "
            "and never finished (its worker was lost each time)",
        )
        return None
    return chunk


def run_targets(run: Evaluation) -> list[Enforced]:
    """The run's pinned revisions as the engine reads them."""
    revisions = run.revisions.select_related("guardrail").order_by("guardrail__guardrail_id")
    return [Enforced(engine_guardrail(revision), revision) for revision in revisions]


def evaluate_batch(
    run: Evaluation, targets: Sequence[Enforced], traces: Sequence[bulk.StoredTrace], *, fresh: bool = False
) -> bool:
    """Evaluate and store one batch of traces in bulk (nothing stored twice); False when
    the run is no longer running and nothing was stored. `fresh`: the chunk's first attempt."""
    engine = deployment_engine()
    with evaluation_services(run.tenant, evaluation=run) as services:  # one judge client and ledger per batch
        if any(target.guardrail.kind == JUDGE_KIND for target in targets):
            services.know_traces(traces)
        rows = bulk.evaluate_rows(engine, targets, traces, cast(Mode, run.mode), run.pk, services)
    return bulk.store_rows(rows, while_running=run.pk, fresh=fresh)


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
        .exclude(status=EvaluationChunk.Status.DONE)
        .aggregate(n=Count("pk"), last_queued=Max("number", filter=Q(status=EvaluationChunk.Status.QUEUED)))
    )
    if not left["n"]:
        finish_run(chunk.evaluation_id)
    elif left["last_queued"] is None or left["last_queued"] < chunk.number:
        # Nothing after this chunk is waiting: what is left is held by other workers, or
        # its message was lost with one (see `lost_chunks`).
        send_recovery_check(countdown=settings.KINDGI_CHUNK_LEASE_SECONDS + 1)
    return True


def _chunks_left(evaluation_id: int) -> bool:
    return (
        EvaluationChunk.objects.filter(evaluation_id=evaluation_id).exclude(status=EvaluationChunk.Status.DONE).exists()
    )


def send_recovery_check(countdown: float) -> None:
    """Run the recovery check in `countdown` seconds (not when tasks run in this process:
    the check would run at once, before any lease could expire)."""
    from traces.tasks import requeue_expired_work

    if requeue_expired_work.app.conf.task_always_eager:
        return
    try:
        requeue_expired_work.apply_async(countdown=countdown)
    except TRANSIENT_BROKER_ERRORS:
        logger.warning("could not schedule the recovery check; the periodic check will run it")


# ---------------------------------------------------------------------------- recovery


def requeue_expired_work(lost_before: datetime | None = None) -> int:
    """Send again what a lost worker held: chunks whose lease expired, runs never planned,
    runs whose last chunk finished without finishing the run. Returns how many were sent.

    `lost_before`: the broker may have lost every message sent before then; queued chunks,
    runs and uploads sent before it are sent again at once (a second message for the same
    work finds it taken, and does nothing).
    """
    now = timezone.now()
    lost_before = None if lost_before is None else min(lost_before, now)
    sent = 0
    for chunk_id, seen in lost_chunks(now, lost_before)[:10_000]:
        # The new lease covers the message now on its way; only one check sends it.
        renewed = EvaluationChunk.objects.filter(pk=chunk_id, lease_until=seen).update(
            status=EvaluationChunk.Status.QUEUED, lease_until=now + lease()
        )
        if renewed:
            send_chunk(chunk_id)
            sent += 1
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
    from traces.uploads import requeue_stale_uploads

    return sent + requeue_stale_uploads(now, lost_before)
