"""The violations page: filters, chart data, query counts, scoping, the detail page."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from kindgi_console.tenancy.models import Tenant
from kindgi_console.tenancy.scoping import Caller
from tests.conftest import signed_in
from tests.traces import seed
from traces.models import Violation
from traces.review import workflow as review
from traces.store import violation_days


def listed(client: Client, query: str = "") -> list[int]:
    return [v.pk for v in client.get("/violations/?" + query).context["violations"]]


def test_bob_sees_acmes_violations_newest_first(bob: Any, acme: Tenant, halt_guardrail: Any) -> None:
    seed.traces(acme, 3)
    violation_days.redate(Violation.objects.all(), timezone.now())
    ids = sorted(v.pk for v in seed.violations(acme))
    assert listed(signed_in(bob)) == ids[::-1]


def test_charlie_sees_none_of_acmes(charlie: Any, acme: Tenant, halt_guardrail: Any) -> None:
    seed.traces(acme, 2)
    client = signed_in(charlie)
    assert listed(client) == []
    violation = seed.violations(acme)[0]
    assert client.get(f"/violations/{violation.pk}/").status_code == 404
    chart = client.get("/violations/chart.json").json()
    assert all(sum(d["data"]) == 0 for d in chart["datasets"])


def test_every_filter_of_the_api(bob: Any, acme: Tenant, halt_guardrail: Any) -> None:
    seed.traces(acme, 2, prefix="sup", agent="support-bot", flow="refund")
    seed.traces(acme, 1, prefix="bil", agent="billing-bot", flow="invoice")
    client = signed_in(bob)
    everyone = set(listed(client))
    billing = {v.pk for v in Violation.objects.filter(agent="billing-bot")}
    review.review(Violation.objects.filter(pk__in=billing), "acknowledged", "", Caller(user=bob))
    old = Violation.objects.filter(agent="support-bot").first()
    assert old is not None
    violation_days.redate(Violation.objects.filter(pk=old.pk), timezone.now() - timedelta(days=10))
    since = (timezone.localdate() - timedelta(days=2)).isoformat()
    assert set(listed(client, "agent=billing-bot")) == billing
    assert set(listed(client, "flow=invoice")) == billing
    assert set(listed(client, "state=acknowledged")) == billing
    assert set(listed(client, "state=open")) == everyone - billing
    assert set(listed(client, "guardrail=no-refunds")) == everyone
    assert listed(client, "guardrail=other") == listed(client, "guardrail=unknown-id")
    assert set(listed(client, "severity=critical")) == everyone
    assert listed(client, "severity=info") == []
    assert set(listed(client, "action=halt")) == everyone
    assert listed(client, "action=log-only") == []
    assert set(listed(client, "mode=runtime")) == everyone and listed(client, "mode=ci") == []
    assert set(listed(client, f"since={since}")) == everyone - {old.pk}
    assert listed(client, f"until={(timezone.localdate() - timedelta(days=5)).isoformat()}") == [old.pk]


@pytest.mark.parametrize("query", ["", "&state=open&agent=support-bot"])
def test_the_list_costs_the_same_queries_at_any_page_size(
    bob: Any, acme: Tenant, halt_guardrail: Any, query: str
) -> None:
    seed.traces(acme, 120, agent="support-bot")
    client = signed_in(bob)
    counts = []
    for size in (25, 100):
        with CaptureQueriesContext(connection) as queries:
            response = client.get(f"/violations/?size={size}{query}")
        assert len(response.context["violations"]) == size
        counts.append(len(queries))
    assert counts[0] == counts[1]


def test_the_chart_counts_per_day_per_guardrail_and_severity(bob: Any, acme: Tenant, halt_guardrail: Any) -> None:
    seed.traces(acme, 3)
    violation_days.redate(Violation.objects.filter(pk=seed.violations(acme)[0].pk), timezone.now() - timedelta(days=3))
    client = signed_in(bob)
    with CaptureQueriesContext(connection) as queries:
        chart = client.get("/violations/chart.json?by=guardrail").json()
    assert len([q for q in queries if "GROUP BY" in q["sql"]]) == 1
    assert len(chart["labels"]) == 30 and chart["labels"][-1] == timezone.localdate().isoformat()
    (dataset,) = chart["datasets"]
    assert dataset["label"] == "no-refunds" and sum(dataset["data"]) == 3
    assert dataset["data"][-1] == 2 and dataset["data"][-4] == 1
    severity = client.get("/violations/chart.json?by=severity").json()
    assert [d["label"] for d in severity["datasets"]] == ["critical"]
    narrowed = client.get(f"/violations/chart.json?since={timezone.localdate().isoformat()}").json()
    assert narrowed["labels"] == [timezone.localdate().isoformat()]
    assert narrowed["datasets"][0]["data"] == [2]


def test_the_detail_page_links_the_trace_and_shows_the_history(bob: Any, acme: Tenant, halt_guardrail: Any) -> None:
    seed.traces(acme, 1)
    violation = seed.violations(acme)[0]
    review.review_one(violation.pk, "acknowledged", "seen it", Caller(user=bob))
    client = signed_in(bob)
    with CaptureQueriesContext(connection) as queries:
        body = client.get(f"/violations/{violation.pk}/").content.decode()
    assert len(queries) <= 10
    assert f'href="/traces/{violation.trace_id}/"' in body
    assert "seen it" in body and "pill--acknowledged" in body and "Resolve" in body
