"""Retention: a tenant's traces, results and judge ledger entries older than its policy's
days are deleted in batches, with the daily roll-ups kept equal to what remains."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal
from typing import Any

from django.db.models import Count, Sum
from django.db.models.functions import TruncDate
from django.utils import timezone

from guardrails.services import Author, save_guardrail
from tests.conftest import make_guardrail
from tests.traces.test_evaluations import store_traces
from traces.judge import ledger
from traces.models import (
    EvaluationResult,
    JudgeLedgerEntry,
    LedgerDay,
    RetentionPolicy,
    RunTrace,
    Violation,
    ViolationDay,
    ViolationReview,
)
from traces.runs import chunks, evaluations
from traces.store import tasks

NOW = timezone.now()
OLD = NOW - timedelta(days=40)


def history(tenant: Any, guardrail: Any) -> None:
    """Six traces (three received 40 days ago), a run over them, reviews, ledger entries."""
    store_traces(tenant, 6, agent=f"{tenant.slug}-bot")
    old = list(RunTrace.objects.filter(tenant=tenant).order_by("pk").values_list("pk", flat=True)[:3])
    RunTrace.objects.filter(pk__in=old).update(received_at=OLD)
    run = evaluations.create_run(evaluations.RunRequest(tenant=tenant, label="history"))
    chunks.start_run(run.pk)
    for violation in Violation.objects.filter(tenant=tenant):
        ViolationReview.objects.create(tenant=tenant, violation=violation, from_state="open", to_state="resolved")
    ledger.record(
        [
            JudgeLedgerEntry(
                tenant=tenant,
                guardrail=guardrail,
                model_id="judge",
                cost_usd=Decimal("0.25"),
                outcome="PASS",
                created_at=moment,
            )
            for moment in (OLD, OLD, NOW - timedelta(days=1))
        ]
    )


def violation_days_match_violations() -> bool:
    counted = {
        (row.tenant_id, row.guardrail_id, row.severity, row.day): row.count
        for row in ViolationDay.objects.exclude(count=0)
    }
    actual = {
        (t, g, s, d): n
        for t, g, s, d, n in Violation.objects.annotate(d=TruncDate("created_at"))
        .values_list("tenant_id", "guardrail_id", "severity", "d")
        .annotate(n=Count("pk"))
    }
    return counted == actual


def test_old_history_goes_in_batches_and_the_roll_ups_stay_right(acme: Any, globex: Any, settings: Any) -> None:
    settings.KINDGI_RETENTION_BATCH = 2
    guardrail = save_guardrail(make_guardrail(), Author(user=None, label="fixture"))
    history(acme, guardrail)
    history(globex, guardrail)
    # Violations created when their traces were received: some of the chart's days are old.
    Violation.objects.filter(trace__received_at=OLD).update(created_at=OLD)
    ViolationDay.objects.all().delete()
    from traces.store import violation_days

    violation_days.rebuild()
    RetentionPolicy.objects.create(tenant=acme, days=30)

    assert tasks.apply_retention.delay().get() == 3 + 2  # three traces (with their results), two entries

    assert RunTrace.objects.filter(tenant=acme).count() == 3
    assert not RunTrace.objects.filter(tenant=acme, received_at__lt=NOW - timedelta(days=30)).exists()
    assert not EvaluationResult.objects.filter(tenant=acme, trace__received_at=OLD).exists()
    assert EvaluationResult.objects.filter(tenant=acme).count() == 3
    assert not ViolationReview.objects.filter(tenant=acme, violation__trace__received_at=OLD).exists()
    assert JudgeLedgerEntry.objects.filter(tenant=acme).count() == 1
    # globex has no policy: it keeps everything.
    assert RunTrace.objects.filter(tenant=globex).count() == 6
    assert JudgeLedgerEntry.objects.filter(tenant=globex).count() == 3
    assert violation_days_match_violations()
    days = LedgerDay.objects.filter(tenant=acme, calls__gt=0)
    assert list(days.values_list("calls", "cost_usd")) == [(1, Decimal("0.25"))]
    assert LedgerDay.objects.filter(tenant=globex).aggregate(n=Sum("calls"))["n"] == 3


def test_nothing_is_deleted_without_a_policy_or_within_its_days(acme: Any, db: Any) -> None:
    guardrail = save_guardrail(make_guardrail(), Author(user=None, label="fixture"))
    history(acme, guardrail)
    from traces.store import retention

    assert retention.apply_retention() == 0
    RetentionPolicy.objects.create(tenant=acme, days=60)
    assert retention.apply_retention() == 0
    assert RunTrace.objects.filter(tenant=acme).count() == 6
