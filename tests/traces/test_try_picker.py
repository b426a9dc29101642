"""The traces Try it offers: the current tenant's, searchable, recent failures of the check first."""

from __future__ import annotations

from typing import Any

from django.test import Client

from kindgi_console.tenancy.models import Membership, Tenant
from tests.traces import seed
from traces.models import RunTrace


def picked(client: Client, query: str = "") -> list[dict[str, Any]]:
    response = client.get(f"/traces/picker.json?{query}")
    assert response.status_code == 200
    return response.json()["results"]


def test_it_lists_the_current_tenants_traces_only(alice: Any, acme: Tenant, globex: Tenant) -> None:
    Membership.objects.create(user=alice, tenant=globex, role="author")
    seed.traces(acme, 2)
    seed.traces(globex, 2)
    client = Client()
    client.force_login(alice)
    client.post("/switch-tenant/", {"tenant": "acme"})
    assert {row["id"] for row in picked(client)} == {"run-acme-0000", "run-acme-0001"}
    assert all(row["url"].endswith("?tenant=acme") for row in picked(client))
    client.post("/switch-tenant/", {"tenant": "globex"})
    assert {row["id"] for row in picked(client)} == {"run-globex-0000", "run-globex-0001"}


def test_charlie_sees_none_of_acmes(charlie: Any, acme: Tenant) -> None:
    seed.traces(acme, 2)
    client = Client()
    client.force_login(charlie)
    assert picked(client) == []
    assert picked(client, "q=run-acme") == []


def test_it_searches_id_agent_and_flow(alice: Any, acme: Tenant) -> None:
    seed.traces(acme, 2, prefix="billing", agent="billing-bot", flow="refunds")
    seed.traces(acme, 2, prefix="support", agent="support-bot", flow="faq")
    client = Client()
    client.force_login(alice)
    assert {r["id"] for r in picked(client, "q=billing-acme-0001")} == {"billing-acme-0001"}
    assert {r["agent"] for r in picked(client, "q=SUPPORT")} == {"support-bot"}
    assert {r["flow"] for r in picked(client, "q=refund")} == {"refunds"}


def test_the_traces_that_failed_the_check_come_first(alice: Any, acme: Tenant, halt_guardrail: Any) -> None:
    failing = seed.traces(acme, 2, prefix="refund")  # each calls issue_refund: a violation
    RunTrace.objects.filter(pk__in=[t.pk for t in failing]).update(received_at="2020-01-01T00:00:00Z")
    seed.traces(acme, 3, prefix="clean", toolCalls=[])
    client = Client()
    client.force_login(alice)
    rows = picked(client, "guardrail=no-refunds")
    assert [r["failed"] for r in rows] == [True, True, False, False, False]
    assert {r["id"] for r in rows[:2]} == {t.trace_id for t in failing}
    unsaved = picked(client, "guardrail=not-saved-yet&check=never-call-tool")
    assert [r["failed"] for r in unsaved][:2] == [True, True]
    assert not any(r["failed"] for r in picked(client, "check=must-cite"))
