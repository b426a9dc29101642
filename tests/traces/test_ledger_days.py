"""The ledger's daily roll-up: kept by the one write path, and its sums equal the entries'."""

from __future__ import annotations

import itertools
import random
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from guardrails.models import Guardrail
from guardrails.services import Author, save_guardrail
from kindgi_console.tenancy.models import Tenant
from tests.conftest import make_guardrail
from traces.judge import ledger
from traces.models import JudgeLedgerEntry, LedgerDay

NOON = timezone.make_aware(datetime(2026, 11, 20, 12, 0))


def varied_entries(tenants: list[Tenant], guardrails: list[Guardrail], count: int, seed: int) -> list[JudgeLedgerEntry]:
    """Entries with every kind of call: cache hits, errors, unbilled, over budget, no tokens,
    odd costs, over several days and at both ends of a day."""
    rng = random.Random(seed)
    entries = []
    for _ in range(count):
        cache_hit = rng.random() < 0.2
        tokens = None if rng.random() < 0.1 else rng.randrange(1, 5000)
        entries.append(
            JudgeLedgerEntry(
                tenant=rng.choice(tenants),
                guardrail=rng.choice(guardrails),
                model_id=rng.choice(["small-judge", "big-judge", "other-judge"]),
                input_tokens=tokens,
                output_tokens=None if tokens is None else rng.randrange(0, 400),
                cost_usd=Decimal(0) if cache_hit else Decimal(rng.randrange(0, 10**9)) / 10**12,
                outcome=rng.choice(["PASS", "FAIL", "0.5", "error"]),
                billed=rng.random() < 0.8,
                cache_hit=cache_hit,
                over_budget_cost=rng.random() < 0.3,
                over_budget_latency=rng.random() < 0.3,
                created_at=NOON
                + timedelta(
                    hours=rng.choice([-12, -1, 0, 11]),
                    days=rng.randrange(-4, 4),
                    microseconds=rng.randrange(0, 10**6) - 1,
                ),
            )
        )
    return entries


def arrange(acme: Tenant, globex: Tenant) -> None:
    guardrails = [
        save_guardrail(make_guardrail(gid), Author(user=None, label="test")) for gid in ("no-refunds", "polite")
    ]
    # Several writes, so that roll-up rows are incremented, not only inserted.
    for seed in range(4):
        ledger.record(varied_entries([acme, globex], guardrails, 60, seed))


def both_ways(entries: Any, days: Any, group_by: list[str]) -> tuple[list[Any], list[Any]]:
    return ledger.summarise(entries, group_by), ledger.summarise(entries, group_by, days)


def test_the_roll_up_sums_equal_the_entries_sums_for_every_grouping(acme: Tenant, globex: Tenant) -> None:
    arrange(acme, globex)
    entries, days = JudgeLedgerEntry.objects.all(), LedgerDay.objects.all()
    for size in range(5):
        for group_by in itertools.permutations(["guardrail", "tenant", "model", "day"], size):
            from_entries, from_days = both_ways(entries, days, list(group_by))
            assert from_days == from_entries, group_by
    totals = ledger.summarise(entries, [], days)[0]
    assert totals["calls"] == JudgeLedgerEntry.objects.filter(cache_hit=False).count()
    exact_cost = sum((entry.cost_usd for entry in entries), Decimal(0))
    assert Decimal(totals["costUsd"]) == exact_cost


def test_the_roll_up_sums_equal_under_filters_and_tenant_scope(acme: Tenant, globex: Tenant) -> None:
    arrange(acme, globex)
    day = NOON.date()
    for entries, days in [
        (JudgeLedgerEntry.objects.filter(tenant=acme), LedgerDay.objects.filter(tenant=acme)),
        (
            JudgeLedgerEntry.objects.filter(model_id="big-judge", guardrail__guardrail_id="polite"),
            LedgerDay.objects.filter(model_id="big-judge", guardrail__guardrail_id="polite"),
        ),
        (
            JudgeLedgerEntry.objects.filter(
                created_at__gte=timezone.make_aware(datetime(2026, 11, 19)),
                created_at__lt=timezone.make_aware(datetime(2026, 11, 21)),
            ),
            LedgerDay.objects.filter(day__gte=day - timedelta(1), day__lte=day),
        ),
        (JudgeLedgerEntry.objects.none(), LedgerDay.objects.none()),
    ]:
        for group_by in ([], ["model"], ["day", "model"], ["tenant", "guardrail"]):
            from_entries, from_days = both_ways(entries, days, group_by)
            assert from_days == from_entries, group_by


def test_rebuilding_the_roll_up_gives_what_the_writes_kept(acme: Tenant, globex: Tenant) -> None:
    arrange(acme, globex)
    fields = ["tenant_id", "guardrail_id", "model_id", "day", *ledger.DAY_COUNTERS]
    kept = sorted(LedgerDay.objects.values_list(*fields))
    assert ledger.rebuild_days() == len(kept)
    assert sorted(LedgerDay.objects.values_list(*fields)) == kept


def test_recording_writes_entries_and_one_upsert_in_one_go(acme: Tenant, halt_guardrail: Any) -> None:
    guardrail = Guardrail.objects.get()
    calls = [
        JudgeLedgerEntry(
            tenant=acme, guardrail=guardrail, model_id="m", cost_usd=Decimal("0.1"), outcome="PASS", created_at=NOON
        )
        for _ in range(3)
    ]
    with CaptureQueriesContext(connection) as queries:
        stored = ledger.record(calls)
    assert all(entry.pk for entry in stored)
    upserts = [q for q in queries.captured_queries if "ON CONFLICT" in q["sql"]]
    assert len(upserts) == 1
    ledger.record(
        [
            JudgeLedgerEntry(
                tenant=acme,
                guardrail=guardrail,
                model_id="m",
                cost_usd=Decimal("0.000000000001"),
                outcome="error",
                created_at=NOON,
            )
        ]
    )
    row = LedgerDay.objects.get()
    assert (row.calls, row.errors, row.day) == (4, 1, NOON.date())
    assert row.cost_usd == Decimal("0.300000000001")


def test_get_ledger_answers_from_the_roll_up_only_for_whole_days(
    api: Any, acme_key: str, acme: Tenant, globex: Tenant
) -> None:
    arrange(acme, globex)
    client = api(acme_key)
    for query, rolled_up in [
        ("group_by=model", True),
        ("group_by=day,model&since=2026-11-19T00:00:00Z&until=2026-11-21T00:00:00Z", True),
        ("group_by=model&since=2026-11-19T10:30:00Z", False),
        ("group_by=model&until=2026-11-20T23:59:59.5Z", False),
    ]:
        with CaptureQueriesContext(connection) as queries:
            body = client.get(f"/api/v1/ledger?{query}").json()
        tables = " ".join(q["sql"] for q in queries.captured_queries)
        assert ("traces_ledgerday" in tables) is rolled_up, query
        entries = JudgeLedgerEntry.objects.filter(tenant=acme)
        for name, lookup in (("since", "created_at__gte"), ("until", "created_at__lt")):
            for part in query.split("&"):
                if part.startswith(f"{name}="):
                    entries = entries.filter(**{lookup: datetime.fromisoformat(part[len(name) + 1 :])})
        group_by = query.split("&")[0].removeprefix("group_by=").split(",")
        assert body["groups"] == ledger.summarise(entries, group_by), query
