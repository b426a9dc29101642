"""How an evaluation run ends (succeeded, cancelled, failed), its progress and its summary.

`finish_run` and `stop_run` lock the run's row before they end it, which waits for every
batch being written: the summary and `done` they take in the same transaction count
exactly the results and traces stored (each batch raises its chunk's `progress` in the
transaction that stores it). The runs' own flow is in `traces.runs.evaluations`.
"""

from __future__ import annotations

from django.db import transaction
from django.db.models import Count, F, OuterRef, Subquery, Sum
from django.db.models.functions import Coalesce, Greatest
from django.utils import timezone

from guardrails.models import Guardrail
from traces.models import Evaluation, EvaluationChunk, EvaluationResult
from traces.store import signals

STATUSES = ("pass", "fail", "error", "skipped")


def finish_run(evaluation_id: int) -> None:
    """A running run whose chunks are all done succeeds, with its summary and progress
    taken under the run's lock (see `stop_run`)."""
    with transaction.atomic():
        live = (
            Evaluation.objects.select_for_update()
            .filter(pk=evaluation_id, status=Evaluation.Status.RUNNING)
            .values_list("pk", flat=True)
        )
        if not list(live):
            return
        count_done(evaluation_id, exact=True)
        Evaluation.objects.filter(pk=evaluation_id).update(
            status=Evaluation.Status.SUCCEEDED, summary=run_summary(evaluation_id), finished_at=timezone.now()
        )


def cancel_run(run: Evaluation) -> bool:
    """Stop a queued or running run: its chunks not yet done are not evaluated."""
    cancelled = stop_run(run.pk, Evaluation.Status.CANCELLED)
    run.refresh_from_db()
    return cancelled


def fail_run(evaluation_id: int, error: str) -> None:
    """A run that cannot go on: its remaining chunks stop, the error is shown."""
    stop_run(evaluation_id, Evaluation.Status.FAILED, error)


def stop_run(evaluation_id: int, status: str, error: str = "") -> bool:
    """End a queued or running run as `status`; False when it had already ended.

    The run's row is locked FOR UPDATE first, which waits for every batch being written
    (writers hold it FOR KEY SHARE, `bulk.run_is_live`); every later batch sees the run
    ended and writes nothing. So `finished_at` follows the last result, and the summary
    and `done`, taken in the same transaction, count exactly what is stored.
    """
    with transaction.atomic():
        live = (
            Evaluation.objects.select_for_update()
            .filter(pk=evaluation_id, status__in=[Evaluation.Status.QUEUED, Evaluation.Status.RUNNING])
            .values_list("pk", flat=True)
        )
        if not list(live):
            return False
        Evaluation.objects.filter(pk=evaluation_id).update(
            status=status, finished_at=timezone.now(), error=error[:2000]
        )
        EvaluationChunk.objects.filter(evaluation_id=evaluation_id).exclude(
            status=EvaluationChunk.Status.SUCCEEDED
        ).update(status=EvaluationChunk.Status.CANCELLED, lease_until=None)
        if status == Evaluation.Status.FAILED:
            signals.announce_run_failed(evaluation_id, error)
        count_done(evaluation_id, exact=True)
        Evaluation.objects.filter(pk=evaluation_id).update(summary=run_summary(evaluation_id))
    return True


def count_done(evaluation_id: int, *, exact: bool = False) -> None:
    """Set the run's `done` to the traces its chunks have counted (their `progress`).

    Batches commit their chunk's progress without locking the run's row against each
    other, so a sum read meanwhile may miss one still committing: `done` only rises here.
    `exact`, as a run ends (its row locked FOR UPDATE, every batch being written waited
    for): exactly the sum.
    """
    counted = Coalesce(
        Subquery(
            EvaluationChunk.objects.filter(evaluation_id=OuterRef("pk"))
            .order_by()
            .values("evaluation_id")
            .annotate(n=Sum("progress"))
            .values("n")
        ),
        0,
    )
    Evaluation.objects.filter(pk=evaluation_id).update(done=counted if exact else Greatest(F("done"), counted))


def fail_run_of_chunk(chunk_id: int, error: str) -> None:
    evaluation_id = EvaluationChunk.objects.filter(pk=chunk_id).values_list("evaluation_id", flat=True).first()
    if evaluation_id is not None:
        fail_run(evaluation_id, error)


def run_summary(evaluation_id: int) -> dict[str, dict[str, int]]:
    """pass / fail / error / skipped per guardrail, over the traces evaluated so far.

    A run stores its skipped results; a run from before it did not, so `skipped` is also
    at least the traces done that have no result for that guardrail.
    """
    run = Evaluation.objects.filter(pk=evaluation_id).values("done").first()
    done = run["done"] if run else 0
    names = dict(
        Evaluation.revisions.through.objects.filter(evaluation_id=evaluation_id).values_list(
            "guardrailrevision__guardrail_id", "guardrailrevision__guardrail__guardrail_id"
        )
    )
    summary = {name: dict.fromkeys(STATUSES, 0) for name in sorted(names.values())}
    # Counted by the guardrail's key, named after: a join per result cost twice the count.
    grouped = list(
        EvaluationResult.objects.filter(evaluation_id=evaluation_id)
        .values_list("guardrail_id", "shadow", "status")
        .annotate(n=Count("id"))
        .order_by()
    )
    # A guardrail evaluated in shadow beside its enforced revision counts what is enforced.
    enforced = {pk for pk, shadow, _, _ in grouped if not shadow}
    counts = [(pk, status, n) for pk, shadow, status, n in grouped if not shadow or pk not in enforced]
    unnamed = {pk for pk, _, _ in counts} - set(names)
    if unnamed:  # a run whose revisions were unlinked since (not done by the console)
        names.update(Guardrail.objects.filter(pk__in=unnamed).values_list("pk", "guardrail_id"))
    for pk, status, n in counts:
        summary.setdefault(names[pk], dict.fromkeys(STATUSES, 0))[status] = n
    for row in summary.values():
        row["skipped"] = max(row["skipped"], done - row["pass"] - row["fail"] - row["error"])
    return summary


def live_summary(run: Evaluation) -> dict[str, dict[str, int]]:
    """The stored summary of a finished run, or the one so far of a running run."""
    if run.is_final and run.summary:
        summary: dict[str, dict[str, int]] = run.summary
        return summary
    return run_summary(run.pk)
