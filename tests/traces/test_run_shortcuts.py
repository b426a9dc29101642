"""The new-run page's shortcuts to a run under a reviewer's judge limit: "zero-llm guardrails
only" (the page and the API) and the traces' dates as whole days, like the violations page;
another tenant's user starts nothing in acme and sees none of its guardrails or traces."""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal
from typing import Any

import pytest
from django.utils import timezone

from guardrails.services import Author, save_guardrail
from kindgi_console.tenancy.models import Tenant
from tests.conftest import make_guardrail, make_trace, signed_in
from tests.traces.seed import run_trace
from tests.traces.test_judge_ledger import judge_guardrail, local_judge  # noqa: F401 (fixtures)
from traces.models import Evaluation, RunTrace


@pytest.fixture
def judged(api: Any, acme: Tenant, acme_key: str, local_judge: Any, judge_guardrail: Any, halt_guardrail: Any) -> Any:
    """acme's traces, a judge over the reviewer's limit and a zero-llm guardrail beside it."""
    api(acme_key).post(
        "/api/v1/traces", data={"traces": [make_trace(f"j-{n}", toolCalls=[]) for n in range(3)]}, format="json"
    )
    acme.reviewer_judge_limit_usd = Decimal("0")
    acme.save()
    return acme


def test_zero_llm_only_ticks_the_zero_llm_guardrails_and_a_reviewer_may_start_it(
    bob: Any, judged: Tenant, django_capture_on_commit_callbacks: Any
) -> None:
    client = signed_in(bob)
    everything = client.get("/evaluations/new/").content.decode()
    assert "data-start-run disabled" in everything and "data-select-zero-llm" in everything
    page = client.get("/evaluations/new/?select=zero-llm")
    html = page.content.decode()
    assert page.context["judge_estimate"] is None and page.context["limit_reason"] is None
    assert 'value="no-refunds" checked' in html.replace('name="guardrails" ', "").replace('id="id_guardrails_1" ', "")
    assert 'value="no-refund-promises" checked' not in html and "data-no-judge" in html
    assert "data-start-run disabled" not in html
    with django_capture_on_commit_callbacks(execute=True):
        started = client.post(
            "/evaluations/new/", {"guardrails": page.context["form"].initial["guardrails"], "mode": "ci"}
        )
    run = Evaluation.objects.get()
    assert started.status_code == 302 and run.guardrails == ["no-refunds"] and run.started_by == bob


def test_the_api_starts_a_zero_llm_only_run_for_a_reviewer(api: Any, bob: Any, judged: Tenant) -> None:
    assert api(bob).post("/api/v1/evaluations", {"tenant": "acme"}, format="json").status_code == 403
    answer = api(bob).post("/api/v1/evaluations", {"tenant": "acme", "zeroLlmOnly": True}, format="json")
    assert answer.status_code == 202, answer.json()
    assert [g["id"] for g in answer.json()["guardrails"]] == ["no-refunds"]
    named = api(bob).post(
        "/api/v1/evaluations",
        {"tenant": "acme", "zeroLlmOnly": True, "guardrails": ["no-refund-promises"]},
        format="json",
    )
    assert named.status_code == 400 and named.json()["errors"][0]["path"] == "/zeroLlmOnly"
    bad = api(bob).post("/api/v1/evaluations", {"tenant": "acme", "zeroLlmOnly": "yes"}, format="json")
    assert bad.status_code == 400 and bad.json()["errors"][0]["path"] == "/zeroLlmOnly"


def test_the_estimate_of_zero_llm_only_calls_no_judge(api: Any, bob: Any, judged: Tenant) -> None:
    every = api(bob).get("/api/v1/evaluations/estimate?tenant=acme").json()
    assert every["calls"] == 3
    zero = api(bob).get("/api/v1/evaluations/estimate?tenant=acme&zeroLlmOnly=true").json()
    assert (zero["calls"], zero["models"]) == (0, {})
    bad = api(bob).get("/api/v1/evaluations/estimate?tenant=acme&zeroLlmOnly=maybe")
    assert bad.status_code == 400 and bad.json()["errors"][0]["path"] == "/zeroLlmOnly"


def received(tenant: Tenant, name: str, day: str) -> RunTrace:
    moment = timezone.make_aware(datetime.fromisoformat(f"{day}T12:00:00"))
    trace = run_trace(tenant, make_trace(name, tenant=tenant.slug), received_at=moment)
    trace.save()
    return trace


def test_the_traces_dates_are_whole_days_like_the_violations_page(
    alice: Any, acme: Tenant, halt_guardrail: Any, django_capture_on_commit_callbacks: Any
) -> None:
    for n, day in enumerate(("2026-11-01", "2026-11-02", "2026-11-03", "2026-11-04")):
        received(acme, f"d-{n}", day)
    client = signed_in(alice)
    page = client.get("/evaluations/new/?since=2026-11-02&until=2026-11-03")
    html = page.content.decode()
    assert page.context["selected_traces"] == 2  # both days whole, the last one included
    assert 'type="date" name="since" id="id_since" value="2026-11-02"' in html
    assert 'type="date" name="until" id="id_until" value="2026-11-03"' in html
    with django_capture_on_commit_callbacks(execute=True):
        client.post(
            "/evaluations/new/",
            {"guardrails": ["no-refunds"], "mode": "ci", "since": "2026-11-02", "until": "2026-11-03"},
        )
    run = Evaluation.objects.get()
    start, end = (timezone.make_aware(datetime.fromisoformat(d)) for d in ("2026-11-02", "2026-11-04"))
    assert run.trace_filters == {"since": start.isoformat(), "until": end.isoformat()} and run.total == 2
    again = client.get("/evaluations/new/", run.trace_filters)
    assert 'value="2026-11-03"' in again.content.decode()  # a stored run's bounds show as the same days
    exact = client.get("/evaluations/new/?since=2026-11-02T10:00:00Z").content.decode()
    assert 'type="text" name="since" id="id_since" value="2026-11-02T10:00:00Z"' in exact  # a time within a day
    backwards = client.get("/evaluations/new/?since=2026-11-03&until=2026-11-01")
    assert "until must be after since" in backwards.content.decode()


def test_another_tenants_user_gets_nothing_of_acme_from_the_new_run_page(
    api: Any, charlie: Any, globex: Tenant, acme: Tenant, halt_guardrail: Any, django_capture_on_commit_callbacks: Any
) -> None:
    save_guardrail(make_guardrail("acme-only"), Author(user=None, label="t"), owner=acme)
    received(acme, "acme-trace", "2026-11-02")
    client = signed_in(charlie)
    page = client.get("/evaluations/new/?select=zero-llm&since=2026-11-01&until=2026-11-30")
    assert "acme-only" not in page.content.decode() and page.context["selected_traces"] == 0
    assert page.context["form"].initial["guardrails"] == ["no-refunds"]
    with django_capture_on_commit_callbacks(execute=True):
        refused = client.post("/evaluations/new/", {"guardrails": ["acme-only"], "mode": "ci"})
    assert refused.status_code == 200 and not Evaluation.objects.exists()  # not a choice of charlie's
    assert api(charlie).post(
        "/api/v1/evaluations", {"tenant": "acme", "zeroLlmOnly": True}, format="json"
    ).status_code in (403, 404)
    assert api(charlie).get("/api/v1/evaluations/estimate?tenant=acme&zeroLlmOnly=true").status_code == 404
    assert not Evaluation.objects.filter(tenant=acme).exists()
