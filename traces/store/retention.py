"""Retention: a tenant's history older than its `RetentionPolicy.days` is deleted.

The periodic task (`traces.tasks.apply_retention`) deletes, for each tenant with a policy,
the traces received before the cut-off with their results, violations and the reviews of
those (a result is never older than its trace, so no older result outlives them), then
the judge ledger entries created before it. Each batch of
KINDGI_RETENTION_BATCH rows is one short transaction, so no lock is held for long and the
pages keep answering while a large backlog is deleted. The daily roll-ups (`ViolationDay`,
`LedgerDay`) lose exactly what is deleted, in the same transaction, and the kept
comparisons of the runs whose results go are dropped.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from functools import partial

from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from traces.judge import ledger
from traces.models import EvaluationResult, JudgeLedgerEntry, RetentionPolicy, RunComparison, RunTrace, ViolationReview
from traces.store import violation_days


def apply_retention(now: datetime | None = None) -> int:
    """Apply every tenant's policy; returns how many traces, results and entries were deleted."""
    moment = now or timezone.now()
    deleted = 0
    for tenant_id, days in RetentionPolicy.objects.values_list("tenant_id", "days"):
        cutoff = moment - timedelta(days=days)
        deleted += _in_batches(partial(delete_old_traces, tenant_id, cutoff))
        deleted += _in_batches(partial(delete_old_ledger_entries, tenant_id, cutoff))
    return deleted


def _in_batches(step: Callable[[], int]) -> int:
    total = 0
    while True:
        deleted = step()
        total += deleted
        if deleted < settings.KINDGI_RETENTION_BATCH:
            return total


def delete_old_traces(tenant_id: int, cutoff: datetime) -> int:
    """One batch of the tenant's traces received before `cutoff`, with what hangs on them.

    The batch's traces are locked first (FOR UPDATE, skipping those another pass holds), so
    two passes at once (a slow pass overtaken by the next) delete different traces; the
    violations are counted out of the roll-up from what the DELETE itself returns, so a
    violation a run commits meanwhile is either deleted and uncounted, or kept and counted.
    """
    with transaction.atomic():
        ids = list(
            RunTrace.objects.filter(tenant_id=tenant_id, received_at__lt=cutoff)
            .order_by("received_at", "pk")
            .select_for_update(skip_locked=True, of=("self",))
            .values_list("pk", flat=True)[: settings.KINDGI_RETENTION_BATCH]
        )
        if not ids:
            return 0
        _delete_violations(ids)
        results = EvaluationResult.objects.filter(trace_id__in=ids)
        # The runs' kept comparisons counted these results: computed again when next asked for.
        forget_comparisons(
            list(results.filter(evaluation__isnull=False).order_by().values_list("evaluation_id", flat=True).distinct())
        )
        results._raw_delete(results.db)  # their violations are gone
        JudgeLedgerEntry.objects.filter(trace_id__in=ids).update(trace=None)
        RunTrace.objects.filter(pk__in=ids).only("pk").delete()
    return len(ids)


def delete_old_ledger_entries(tenant_id: int, cutoff: datetime) -> int:
    """One batch of the tenant's judge ledger entries created before `cutoff`."""
    with transaction.atomic():
        # Locked (skipping those another pass holds): two passes never take one entry out twice.
        entries = list(
            JudgeLedgerEntry.objects.filter(tenant_id=tenant_id, created_at__lt=cutoff)
            .order_by("created_at", "pk")
            .select_for_update(skip_locked=True, of=("self",))[: settings.KINDGI_RETENTION_BATCH]
        )
        if not entries:
            return 0
        ledger.remove_many_from_days(entries)
        doomed = JudgeLedgerEntry.objects.filter(pk__in=[entry.pk for entry in entries])
        # Taken out of the roll-up above, all at once: not one by one by the delete signal.
        doomed._raw_delete(doomed.db)
    return len(entries)


def _delete_violations(trace_ids: list[int]) -> None:
    """The violations of these traces and their reviews, counted out of the chart's roll-up
    from the rows the DELETE returns (not one by one by the delete signal, nor from an
    earlier read that a run writing meanwhile would have made stale)."""
    ViolationReview.objects.filter(violation__trace_id__in=trace_ids).delete()
    violation_days.delete_of_traces(trace_ids)


def forget_comparisons(evaluation_ids: list[int]) -> None:
    """Drop the kept comparisons of these runs (some of their results are being deleted)."""
    if evaluation_ids:
        RunComparison.objects.filter(Q(evaluation_id__in=evaluation_ids) | Q(other_id__in=evaluation_ids)).delete()
