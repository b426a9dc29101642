"""Reading back: traces, violations and the ledger, scoped to the caller's tenants."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from kindgi_console.tenancy.models import ApiKey, Tenant
from tests.conftest import app_queries, make_trace
from tests.traces import seed
from traces.models import RunTrace, Violation


def ingest(client: Any, *ids: str, **fields: Any) -> None:
    traces = [make_trace(trace_id, **fields) for trace_id in ids]
    response = client.post("/api/v1/traces", data={"traces": traces}, format="json")
    assert response.status_code == 207


def evaluate(client: Any, trace_id: str, **fields: Any) -> None:
    response = client.post("/api/v1/evaluate", data=make_trace(trace_id, **fields), format="json")
    assert response.status_code == 200


def all_pages(client: Any, url: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    while url:
        body = client.get(url).json()
        items.extend(body["results"])
        url = body["next"]
    return items


# ------------------------------------------------------------------ traces


def test_it_lists_the_callers_traces_newest_first(api: Any, acme_key: str, alice: Any) -> None:
    client = api(acme_key)
    ingest(client, "one")
    ingest(client, "two")
    for reader in (client, api(alice)):
        ids = [item["id"] for item in reader.get("/api/v1/traces").json()["results"]]
        assert ids == ["two", "one"]


def test_bob_the_reviewer_reads_acmes_traces(api: Any, acme_key: str, bob: Any) -> None:
    ingest(api(acme_key), "one")
    assert [t["id"] for t in api(bob).get("/api/v1/traces").json()["results"]] == ["one"]
    assert api(bob).get("/api/v1/traces/one").status_code == 200


def test_charlie_sees_no_acme_trace(api: Any, acme_key: str, charlie: Any, charlie_key: str) -> None:
    ingest(api(acme_key), "one")
    for outsider in (api(charlie), api(charlie_key)):
        assert outsider.get("/api/v1/traces").json() == {"next": None, "results": []}
        response = outsider.get("/api/v1/traces/one")
        assert response.status_code == 404
        assert response.json() == {"errors": [{"path": "", "message": "not found"}]}
        assert outsider.get("/api/v1/traces/one?tenant=acme").status_code == 404


def test_a_key_bound_to_no_tenant_reads_no_trace(api: Any, acme_key: str, author_key: str) -> None:
    ingest(api(acme_key), "one")
    assert api(author_key).get("/api/v1/traces").json()["results"] == []


def test_it_filters_traces(api: Any, acme_key: str) -> None:
    client = api(acme_key)
    ingest(client, "a", agent="billing", flow="refund")
    ingest(client, "b", agent="support", flow="refund")
    ingest(client, "c", agent="support", flow="faq")

    def ids(query: str) -> list[str]:
        return sorted(t["id"] for t in client.get("/api/v1/traces?" + query).json()["results"])

    assert ids("agent=support") == ["b", "c"]
    assert ids("flow=refund") == ["a", "b"]
    assert ids("agent=support&flow=faq") == ["c"]
    RunTrace.objects.filter(trace_id="a").update(received_at=timezone.now() - timedelta(days=2))
    since = (timezone.now() - timedelta(days=1)).isoformat().replace("+00:00", "Z")
    assert ids(f"since={since}") == ["b", "c"]
    assert ids(f"until={since}") == ["a"]


def test_a_bad_filter_value_is_400_naming_the_parameter(api: Any, acme_key: str) -> None:
    response = api(acme_key).get("/api/v1/traces?since=yesterday")
    assert response.status_code == 400
    assert response.json()["errors"][0]["path"] == "/since"


def test_the_cursor_walks_every_trace_once_even_with_equal_times(api: Any, acme_key: str) -> None:
    client = api(acme_key)
    ingest(client, *[f"run-{n:03}" for n in range(25)])  # one batch: one received_at
    items = all_pages(client, "/api/v1/traces?limit=7")
    assert sorted(item["id"] for item in items) == [f"run-{n:03}" for n in range(25)]


def test_a_forged_cursor_is_400(api: Any, acme_key: str) -> None:
    response = api(acme_key).get("/api/v1/traces?cursor=not-a-cursor")
    assert response.status_code == 400
    assert response.json()["errors"][0]["path"] == "/cursor"


@pytest.mark.parametrize("url", ["/api/v1/traces", "/api/v1/violations", "/api/v1/ledger/entries"])
def test_a_list_costs_the_same_queries_whatever_the_page_size(
    api: Any, acme_key: str, halt_guardrail: Any, url: str
) -> None:
    client = api(acme_key)
    for n in range(30):
        evaluate(client, f"run-{n}")
    add_ledger_entries(Tenant.objects.get(slug="acme"), 30)
    counts = []
    for limit in (1, 30):
        with CaptureQueriesContext(connection) as queries:
            body = client.get(f"{url}?limit={limit}").json()
        assert len(body["results"]) == limit
        counts.append(app_queries(queries))
    assert counts[0] == counts[1]
    if connection.vendor == "postgresql":  # SQLite adds the database cache's savepoints
        assert counts[1] <= 3


def test_it_reads_a_trace_by_the_runtimes_id(api: Any, acme_key: str, halt_guardrail: Any) -> None:
    client = api(acme_key)
    evaluate(client, "run/with/slashes")
    body = client.get("/api/v1/traces/run/with/slashes").json()
    assert body["id"] == "run/with/slashes" and body["tenant"] == "acme"
    assert body["withheld"] is True and "output" not in body["document"]
    assert [(r["guardrail"], r["status"]) for r in body["results"]] == [("no-refunds", "fail")]


def test_a_trace_id_in_two_visible_tenants_needs_the_tenant(
    api: Any, acme_key: str, charlie_key: str, alice: Any, globex: Tenant
) -> None:
    from kindgi_console.tenancy.models import Membership

    Membership.objects.create(user=alice, tenant=globex, role="reviewer")
    ingest(api(acme_key), "same", output="acme's")
    ingest(api(charlie_key), "same", output="globex's")
    reader = api(alice)
    response = reader.get("/api/v1/traces/same")
    assert response.status_code == 400
    assert response.json()["errors"][0]["path"] == "/tenant"
    body = reader.get("/api/v1/traces/same?tenant=globex").json()
    assert body["document"]["output"] == "globex's"


# ------------------------------------------------------------------ violations


def test_it_lists_violations_newest_first_with_filters(api: Any, acme_key: str, halt_guardrail: Any, bob: Any) -> None:
    client = api(acme_key)
    evaluate(client, "first", agent="billing")
    evaluate(client, "second", agent="support")
    items = api(bob).get("/api/v1/violations").json()["results"]
    assert [item["trace"] for item in items] == ["second", "first"]
    assert items[0] | {"id": 0, "createdAt": ""} == {
        "id": 0,
        "tenant": "acme",
        "trace": "second",
        "guardrail": "no-refunds",
        "revision": 1,
        "evaluation": None,
        "action": "halt",
        "severity": "critical",
        "mode": "runtime",
        "reason": items[0]["reason"],
        "agent": "support",
        "flow": "refund",
        "createdAt": "",
        "state": "open",
        "reviewedBy": None,
        "reviewedAt": None,
        "reviewNote": "",
        "queue": None,
        "assignee": None,
        "assignedAt": None,
    }

    def traces(query: str) -> list[str]:
        return [v["trace"] for v in client.get("/api/v1/violations?" + query).json()["results"]]

    assert traces("agent=billing") == ["first"]
    assert traces("guardrail=no-refunds&severity=critical&action=halt&mode=runtime") == ["second", "first"]
    assert traces("guardrail=other") == []
    assert traces("severity=info") == []
    assert traces("tenant=acme&state=open") == ["second", "first"]
    Violation.objects.filter(trace__trace_id="first").update(state="resolved")
    assert traces("state=resolved") == ["first"]
    assert traces("mode=ci") == []


def test_an_unknown_state_is_400(api: Any, acme_key: str) -> None:
    response = api(acme_key).get("/api/v1/violations?state=closed")
    assert response.status_code == 400
    assert response.json()["errors"][0]["path"] == "/state"


def test_charlie_sees_no_acme_violation(
    api: Any, acme_key: str, halt_guardrail: Any, charlie: Any, charlie_key: str
) -> None:
    evaluate(api(acme_key), "one")
    assert Violation.objects.count() == 1
    for outsider in (api(charlie), api(charlie_key)):
        assert outsider.get("/api/v1/violations").json()["results"] == []
        assert outsider.get("/api/v1/violations?tenant=acme").json()["results"] == []


def test_a_key_without_the_read_scope_reads_nothing(api: Any, acme: Tenant) -> None:
    writer = ApiKey.issue(scopes=["ingest"], tenant=acme)[1]
    for url in ("/api/v1/traces", "/api/v1/violations", "/api/v1/ledger", "/api/v1/ledger/entries"):
        assert api(writer).get(url).status_code == 403


# ------------------------------------------------------------------ ledger


def add_ledger_entries(tenant: Tenant, count: int, **fields: Any) -> None:
    """The seeded ledger entries, with the outcome as these tests write it."""
    seed.ledger(tenant, count, **{"outcome": "pass", **fields})


def test_the_ledger_sums_tokens_cost_and_over_budget_calls(
    api: Any, acme_key: str, acme: Tenant, globex: Tenant, halt_guardrail: Any, bob: Any
) -> None:
    add_ledger_entries(acme, 3)
    add_ledger_entries(acme, 1, model_id="big-judge", cost_usd=Decimal("0.5"), over_budget_cost=True)
    add_ledger_entries(globex, 5)
    body = api(bob).get("/api/v1/ledger?group_by=model,guardrail").json()
    assert body["groupBy"] == ["model", "guardrail"]
    groups = {g["model"]: g for g in body["groups"]}
    assert groups["small-judge"]["calls"] == 3
    assert groups["small-judge"]["inputTokens"] == 3000
    assert groups["small-judge"]["outputTokens"] == 60
    assert Decimal(groups["small-judge"]["costUsd"]) == Decimal("0.00375")
    assert groups["big-judge"]["overBudget"] == 1
    assert groups["big-judge"]["guardrail"] == "no-refunds"
    total = api(acme_key).get("/api/v1/ledger").json()["groups"]
    assert total[0]["calls"] == 4 and Decimal(total[0]["costUsd"]) == Decimal("0.50375")


def test_the_ledger_groups_by_day_and_tenant(api: Any, acme_key: str, acme: Tenant, halt_guardrail: Any) -> None:
    add_ledger_entries(acme, 1)
    add_ledger_entries(acme, 1, created_at=timezone.now() - timedelta(days=3))
    groups = api(acme_key).get("/api/v1/ledger?group_by=day&group_by=tenant").json()["groups"]
    assert len(groups) == 2
    assert {g["tenant"] for g in groups} == {"acme"}
    assert all(len(g["day"]) == 10 for g in groups)
    since = (timezone.now() - timedelta(days=1)).isoformat().replace("+00:00", "Z")
    recent = api(acme_key).get(f"/api/v1/ledger?since={since}").json()["groups"]
    assert recent[0]["calls"] == 1


def test_an_unknown_grouping_is_400(api: Any, acme_key: str) -> None:
    response = api(acme_key).get("/api/v1/ledger?group_by=colour")
    assert response.status_code == 400
    assert response.json()["errors"][0]["path"] == "/group_by"


def test_it_lists_ledger_entries(api: Any, acme_key: str, acme: Tenant, halt_guardrail: Any) -> None:
    add_ledger_entries(acme, 3)
    items = all_pages(api(acme_key), "/api/v1/ledger/entries?limit=2")
    assert len(items) == 3
    assert items[0]["costUsd"] == "0.00125" and items[0]["guardrail"] == "no-refunds"


def test_charlie_sees_no_acme_ledger(
    api: Any, acme: Tenant, halt_guardrail: Any, charlie: Any, charlie_key: str
) -> None:
    add_ledger_entries(acme, 3)
    for outsider in (api(charlie), api(charlie_key)):
        assert outsider.get("/api/v1/ledger/entries").json()["results"] == []
        assert outsider.get("/api/v1/ledger?group_by=tenant").json()["groups"] == []
        assert outsider.get("/api/v1/ledger").json()["groups"][0]["calls"] == 0


@pytest.mark.parametrize("value", ["1.7976931348623157e+308", "99999999999999999999", "0", "1.5"])
def test_a_run_filter_that_is_no_row_id_is_a_400_naming_it(api: Any, acme_key: str, value: str) -> None:
    answer = api(acme_key).get(f"/api/v1/violations?evaluation={value}")
    assert answer.status_code == 400 and "evaluation" in str(answer.json()), answer.content


def test_an_empty_run_filter_is_no_filter_and_described_so(api: Any, acme_key: str, halt_guardrail: Any) -> None:
    """A page's filter bar sends its empty inputs: empty means every run, and the OpenAPI
    description admits it (schemathesis sends it, and expects what is described)."""
    client = api(acme_key)
    evaluate(client, "t-empty-filter", output="internal use only")
    everything = client.get("/api/v1/violations").json()["results"]
    assert everything and client.get("/api/v1/violations?evaluation=").json()["results"] == everything
    schema = client.get("/api/schema/?format=json").json()
    parameter = next(p for p in schema["paths"]["/api/v1/violations"]["get"]["parameters"] if p["name"] == "evaluation")
    assert {"type": "string", "maxLength": 0} in parameter["schema"]["anyOf"]
