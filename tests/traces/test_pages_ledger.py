"""The cost ledger page: its sums equal the API's and the CSV's; filters, scoping, queries."""

from __future__ import annotations

import csv
import io
from datetime import timedelta
from decimal import Decimal
from typing import Any

from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from kindgi_console.tenancy.models import Membership, Tenant
from tests.conftest import signed_in
from tests.traces import seed
from traces.judge import ledger
from traces.models import JudgeLedgerEntry


def csv_of(response: Any) -> list[dict[str, str]]:
    assert response["Content-Type"].startswith("text/csv")
    text = b"".join(response.streaming_content).decode()
    return list(csv.DictReader(io.StringIO(text)))


def arrange(acme: Tenant, globex: Tenant) -> None:
    seed.ledger(acme, 3)
    seed.ledger(
        acme,
        2,
        model_id="big-judge",
        cost_usd=Decimal("0.0421"),
        input_tokens=5000,
        output_tokens=300,
        over_budget_cost=True,
    )
    seed.ledger(
        acme,
        1,
        model_id="big-judge",
        cost_usd=Decimal("0.01"),
        over_budget_latency=True,
        created_at=timezone.now() - timedelta(days=3),
    )
    # A judgement the cache answered (free, unbilled: not a call) and a call that failed.
    seed.ledger(
        acme,
        1,
        model_id="big-judge",
        cost_usd=Decimal(0),
        input_tokens=None,
        output_tokens=None,
        latency_ms=0,
        outcome="cached",
        cache_hit=True,
        billed=False,
        attempts=0,
    )
    seed.ledger(
        acme,
        1,
        cost_usd=Decimal(0),
        input_tokens=None,
        output_tokens=None,
        latency_ms=20000,
        outcome="error",
        error="the provider timed out",
        billed=False,
        attempts=3,
    )
    seed.ledger(globex, 4, model_id="globex-judge", cost_usd=Decimal("9"))


def test_page_api_and_csv_give_the_same_sums(
    api: Any, bob: Any, acme: Tenant, globex: Tenant, halt_guardrail: Any
) -> None:
    arrange(acme, globex)
    client = signed_in(bob)
    page = client.get("/ledger/?group=model")
    groups = {g["model"]: g for g in page.context["groups"]}
    body = api(bob).get("/api/v1/ledger?group_by=model").json()["groups"]
    exported = csv_of(client.get("/ledger/export.csv?group=model"))
    assert set(groups) == {"big-judge", "small-judge"}  # globex's are not bob's
    for wire, row in zip(body, exported, strict=True):
        mine = groups[wire["model"]]
        assert row["model"] == wire["model"]
        assert wire["costUsd"] == row["costUsd"] == mine["costUsd"]
        for column in (
            "calls",
            "billedCalls",
            "cacheHits",
            "errors",
            "overBudget",
            "overCost",
            "overLatency",
            "inputTokens",
            "outputTokens",
        ):
            assert wire[column] == int(row[column]) == mine[column], column
    assert list(exported[0]) == ["model", *ledger.SUMMARY_COLUMNS]
    big, small = groups["big-judge"], groups["small-judge"]
    assert big["costUsd"] == "0.0942" and (big["calls"], big["cacheHits"]) == (3, 1)
    assert (big["overCost"], big["overLatency"], big["billedCalls"]) == (2, 1, 3)
    assert (small["calls"], small["billedCalls"], small["errors"]) == (4, 3, 1)
    total = page.context["total"]
    assert total == ledger.summarise(JudgeLedgerEntry.objects.filter(tenant=acme), [])[0]
    assert total["calls"] == 7 and total["costUsd"] == "0.09795"
    assert (total["overBudget"], total["cacheHits"], total["errors"]) == (3, 1, 1)
    assert "0.097950" in page.content.decode()


def test_grouping_by_day_guardrail_and_tenant(alice: Any, acme: Tenant, globex: Tenant, halt_guardrail: Any) -> None:
    arrange(acme, globex)
    client = signed_in(alice)
    days = client.get("/ledger/?group=day").context["groups"]
    assert [(g["calls"], g["cacheHits"]) for g in days] == [(1, 0), (6, 1)]
    assert [g["guardrail"] for g in client.get("/ledger/").context["groups"]] == ["no-refunds"]
    Membership.objects.create(user=alice, tenant=globex, role="reviewer")
    tenants = client.get("/ledger/?group=tenant&tenant=*").context["groups"]
    assert [(g["tenant"], g["calls"]) for g in tenants] == [("acme", 7), ("globex", 4)]
    only = client.get("/ledger/?group=tenant&tenant=globex").context["groups"]
    assert [(g["tenant"], g["costUsd"]) for g in only] == [("globex", "36")]


def test_the_filters(alice: Any, acme: Tenant, globex: Tenant, halt_guardrail: Any) -> None:
    arrange(acme, globex)
    client = signed_in(alice)
    today = timezone.localdate().isoformat()
    assert client.get(f"/ledger/?since={today}").context["total"]["calls"] == 6
    assert client.get("/ledger/?model=big-judge").context["total"]["calls"] == 3
    assert client.get("/ledger/?guardrail=no-refunds").context["total"]["calls"] == 7
    foreign = client.get("/ledger/?tenant=globex&group=model")  # not one of alice's tenants
    assert "tenant" in foreign.context["form"].errors
    assert "globex-judge" not in {g["model"] for g in foreign.context["groups"]}
    exported = csv_of(client.get(f"/ledger/export.csv?since={today}&group=guardrail"))
    assert exported == [
        {
            "guardrail": "no-refunds",
            "calls": "6",
            "billedCalls": "5",
            "cacheHits": "1",
            "errors": "1",
            "overBudget": "2",
            "overCost": "2",
            "overLatency": "0",
            "inputTokens": "13000",
            "outputTokens": "660",
            "costUsd": "0.08795",
        }
    ]


def test_the_calls_export_streams_each_entry(alice: Any, acme: Tenant, globex: Tenant, halt_guardrail: Any) -> None:
    arrange(acme, globex)
    seed.ledger(acme, 1, model_id="=cmd|' /C calc'!A0", outcome="+danger")
    response = signed_in(alice).get("/ledger/export.csv?rows=entries")
    assert 'filename="kindgi-ledger-calls-' in response["Content-Disposition"]
    rows = csv_of(response)
    assert len(rows) == 9 and {r["tenant"] for r in rows} == {"acme"}
    assert list(rows[0]) == ledger.CSV_COLUMNS  # the columns of the API's entries.csv
    assert rows[0]["model"].startswith("'=") and rows[0]["outcome"] == "'+danger"
    assert sum(Decimal(r["costUsd"]) for r in rows) == Decimal("0.09795") + Decimal("0.00125")


def test_charlie_gets_nothing_of_acmes_ledger(charlie: Any, acme: Tenant, globex: Tenant, halt_guardrail: Any) -> None:
    seed.ledger(acme, 3)
    client = signed_in(charlie)
    assert client.get("/ledger/").context["total"]["calls"] == 0
    assert client.get("/ledger/?tenant=acme").context["total"]["calls"] == 0
    assert client.get("/ledger/?tenant=*").context["total"]["calls"] == 0
    assert csv_of(client.get("/ledger/export.csv?rows=entries&tenant=*"))[1:] == []


def test_the_page_costs_the_same_queries_at_any_page_size(alice: Any, acme: Tenant, halt_guardrail: Any) -> None:
    seed.ledger(acme, 120)
    client = signed_in(alice)
    counts = []
    for size in (25, 100):
        with CaptureQueriesContext(connection) as queries:
            response = client.get(f"/ledger/?size={size}")
        assert len(response.context["entries"]) == size
        counts.append(len(queries))
    assert counts[0] == counts[1]


def test_the_chart_has_the_cost_per_day_by_model(alice: Any, acme: Tenant, globex: Tenant, halt_guardrail: Any) -> None:
    arrange(acme, globex)
    chart = signed_in(alice).get("/ledger/?group=model").context["chart"]
    assert chart["yFormat"] == "usd" and len(chart["labels"]) == 30
    by_model = {d["label"]: d["data"] for d in chart["datasets"]}
    assert by_model["big-judge"][-1] == float(Decimal("0.0842"))
    assert by_model["big-judge"][-4] == 0.01


def test_the_chart_follows_the_grouping(alice: Any, acme: Tenant, globex: Tenant, halt_guardrail: Any) -> None:
    arrange(acme, globex)
    client = signed_in(alice)
    assert [d["label"] for d in client.get("/ledger/").context["chart"]["datasets"]] == ["no-refunds"]
    assert [d["label"] for d in client.get("/ledger/?group=day").context["chart"]["datasets"]] == ["total"]
    Membership.objects.create(user=alice, tenant=globex, role="reviewer")
    by_tenant = client.get("/ledger/?group=tenant").context["chart"]
    assert by_tenant["title"] == "Judge cost per day by tenant"
    assert {d["label"] for d in by_tenant["datasets"]} == {"acme", "globex"}


def test_by_tenant_shows_every_tenant_one_may_read_and_no_other(
    alice: Any, charlie: Any, acme: Tenant, globex: Tenant, halt_guardrail: Any
) -> None:
    arrange(acme, globex)
    Membership.objects.create(user=alice, tenant=globex, role="reviewer")
    groups = signed_in(alice).get("/ledger/?group=tenant").context["groups"]
    assert [(g["tenant"], g["calls"]) for g in groups] == [("acme", 7), ("globex", 4)]
    theirs = signed_in(charlie).get("/ledger/?group=tenant").context["groups"]
    assert [g["tenant"] for g in theirs] == ["globex"]


def test_the_csv_links_name_each_parameter_once(alice: Any, acme: Tenant, globex: Tenant, halt_guardrail: Any) -> None:
    arrange(acme, globex)
    page = signed_in(alice).get("/ledger/?group=model&model=big-judge&size=25").content.decode()
    links = [part.split('"')[0] for part in page.split('href="/ledger/export.csv?')[1:]]
    assert len(links) == 2
    for link in links:
        names = [pair.split("=")[0] for pair in link.replace("&amp;", "&").split("&")]
        assert len(names) == len(set(names)), link
        assert "size" not in names


def test_the_guardrail_page_shows_its_judge_spend(
    alice: Any, charlie: Any, acme: Tenant, globex: Tenant, halt_guardrail: Any
) -> None:
    arrange(acme, globex)
    spend = signed_in(alice).get("/guardrails/no-refunds/").context["spend"]
    assert spend["calls"] == 7 and Decimal(spend["costUsd"]) == Decimal(
        sum(e.cost_usd for e in JudgeLedgerEntry.objects.filter(tenant=acme))
    )
    assert signed_in(charlie).get("/guardrails/no-refunds/").context["spend"]["calls"] == 4


def test_one_guardrail_with_a_budget_gets_its_budget_line(
    alice: Any, acme: Tenant, globex: Tenant, halt_guardrail: Any
) -> None:
    from guardrails.models import Guardrail

    arrange(acme, globex)
    guardrail = Guardrail.objects.get(guardrail_id="no-refunds")
    guardrail.document = {**guardrail.document, "kind": "zero-llm", "budget": {"maxCostUsd": 0.01}}
    guardrail.save(update_fields=["document"])
    client = signed_in(alice)
    plain = client.get("/ledger/?group=model").context["chart"]
    assert "budget" not in " ".join(d["label"] for d in plain["datasets"])
    response = client.get("/ledger/?guardrail=no-refunds")
    chart = response.context["chart"]
    within, over, budget = (d["data"] for d in chart["datasets"])
    assert [d["label"] for d in chart["datasets"]][:2] == ["within budget", "over budget"]
    assert chart["datasets"][2]["type"] == "line"
    today = ledger.summarise(JudgeLedgerEntry.objects.filter(tenant=acme, created_at__date=timezone.localdate()), [])[0]
    cost, calls = Decimal(today["costUsd"]), today["calls"]
    assert Decimal(str(budget[-1])) == Decimal("0.01") * calls
    assert Decimal(str(over[-1])) == max(Decimal(0), cost - Decimal("0.01") * calls) > 0
    assert abs(within[-1] + over[-1] - float(cost)) < 1e-9
    assert "the red part of a bar went over it" in response.content.decode()
