"""The violations' daily roll-up: kept where violations are written, and the chart reads the same from it."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from kindgi_console.tenancy.models import Tenant
from kindgi_console.tenancy.scoping import Caller
from tests.traces import seed
from traces.models import Violation, ViolationDay
from traces.review import workflow as review
from traces.store import violation_days


def both_ways(by: str) -> tuple[list[Any], list[Any]]:
    today = timezone.localdate()
    first = today - timedelta(days=29)
    return (
        violation_days.chart_rows(Violation.objects.all(), None, by, first, today),
        violation_days.chart_rows(Violation.objects.none(), ViolationDay.objects.all(), by, first, today),
    )


def test_the_roll_up_counts_what_the_violations_count(
    bob: Any, acme: Tenant, globex: Tenant, halt_guardrail: Any
) -> None:
    seed.traces(acme, 4)
    seed.traces(globex, 2)
    violation_days.redate(Violation.objects.filter(pk=seed.violations(acme)[0].pk), timezone.now() - timedelta(days=3))
    review.review(Violation.objects.filter(tenant=acme), "resolved", "", Caller(user=bob))
    for by in ("guardrail", "severity"):
        from_violations, from_days = both_ways(by)
        assert sorted(from_days) == sorted(from_violations) and sum(n for *_, n in from_days) == 6
    violation_days.rebuild()
    assert sorted(both_ways("guardrail")[1]) == sorted(both_ways("guardrail")[0])


def test_the_chart_reads_the_roll_up_unless_a_filter_needs_the_violations(
    bob: Any, acme: Tenant, halt_guardrail: Any
) -> None:
    seed.traces(acme, 3)
    client = Client()
    client.force_login(bob)
    for query, rolled_up in [
        ("by=guardrail", True),
        ("by=severity&severity=critical", True),
        ("by=guardrail&guardrail=no-refunds&since=2026-01-01", True),
        ("by=guardrail&state=open", False),
        ("by=severity&agent=x", False),
    ]:
        with CaptureQueriesContext(connection) as queries:
            chart = client.get(f"/violations/chart.json?{query}").json()
        sql = " ".join(q["sql"] for q in queries.captured_queries)
        assert ("traces_violationday" in sql) is rolled_up, query
        if "agent" not in query:
            assert sum(sum(d["data"]) for d in chart["datasets"]) == 3, query


def test_deleting_traces_and_ledger_entries_takes_them_out_of_the_roll_ups(
    bob: Any, acme: Tenant, halt_guardrail: Any
) -> None:
    from decimal import Decimal

    from traces.judge import ledger
    from traces.models import JudgeLedgerEntry, LedgerDay, RunTrace

    stored = seed.traces(acme, 3)
    seed.ledger(acme, 2, cost_usd=Decimal("0.25"))
    RunTrace.objects.filter(pk=stored[0].pk).delete()
    assert sum(ViolationDay.objects.values_list("count", flat=True)) == 2
    JudgeLedgerEntry.objects.filter(pk=JudgeLedgerEntry.objects.first().pk).delete()
    day = LedgerDay.objects.get()
    assert (day.calls, day.cost_usd) == (1, Decimal("0.25"))
    entries = JudgeLedgerEntry.objects.all()
    assert ledger.summarise(entries, ["model"], LedgerDay.objects.all()) == ledger.summarise(entries, ["model"])
