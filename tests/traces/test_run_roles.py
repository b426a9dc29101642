"""Roles that agree: reviewers start runs (under the tenant's judge limit), the pages show no
button that leads to 403, a 403 or 404 page keeps the console's layout and says why, and the
judge estimate prices the ticked guardrail only."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from kindgi_console.tenancy.models import ApiKey, Tenant
from tests.conftest import make_trace, signed_in
from tests.traces.test_evaluations import store_traces
from tests.traces.test_judge_ledger import judge_guardrail, local_judge  # noqa: F401 (fixtures)
from traces.models import Evaluation


def test_a_reviewer_starts_a_run_through_the_api(api: Any, bob: Any, acme: Tenant, halt_guardrail: Any) -> None:
    store_traces(acme, 3)
    answer = api(bob).post("/api/v1/evaluations", {"tenant": "acme"}, format="json")
    assert answer.status_code == 202, answer.json()
    assert Evaluation.objects.get().started_by == bob


def test_a_key_without_the_evaluate_scope_starts_no_run(api: Any, acme: Tenant, halt_guardrail: Any) -> None:
    key = ApiKey.issue(scopes=["read", "review"], tenant=acme, name="reader")[1]
    assert api(key).post("/api/v1/evaluations", {}, format="json").status_code == 403


def test_a_run_over_the_reviewer_judge_limit_needs_an_author(
    api: Any, bob: Any, alice: Any, acme: Tenant, acme_key: str, local_judge: Any, judge_guardrail: Any
) -> None:
    api(acme_key).post(
        "/api/v1/traces", data={"traces": [make_trace(f"j-{n}", toolCalls=[]) for n in range(3)]}, format="json"
    )
    acme.reviewer_judge_limit_usd = Decimal("0")
    acme.save()
    refused = api(bob).post("/api/v1/evaluations", {"tenant": "acme"}, format="json")
    assert refused.status_code == 403
    error = refused.json()["errors"][0]
    assert error["path"] == "/guardrails" and "an author of the tenant starts it" in error["message"]
    assert not Evaluation.objects.exists()
    page = signed_in(bob).get("/evaluations/new/").content.decode()
    assert "cannot be started by a reviewer" in page and "data-start-run disabled" in page
    assert "data-start-run disabled" not in signed_in(alice).get("/evaluations/new/").content.decode()
    assert api(alice).post("/api/v1/evaluations", {"tenant": "acme"}, format="json").status_code == 202
    acme.reviewer_judge_limit_usd = Decimal("100")
    acme.save()
    assert api(bob).post("/api/v1/evaluations", {"tenant": "acme"}, format="json").status_code == 202


def test_the_estimate_from_a_guardrail_page_prices_only_that_guardrail(
    api: Any, alice: Any, acme_key: str, local_judge: Any, judge_guardrail: Any, halt_guardrail: Any
) -> None:
    api(acme_key).post(
        "/api/v1/traces", data={"traces": [make_trace(f"p-{n}", toolCalls=[]) for n in range(3)]}, format="json"
    )
    client = signed_in(alice)
    assert client.get("/evaluations/new/").context["judge_estimate"]["calls"] == 3
    assert client.get("/evaluations/new/?guardrail=no-refunds").context["judge_estimate"] is None
    ticked = client.get("/evaluations/new/?guardrail=no-refund-promises").context["judge_estimate"]
    assert ticked["models"] == {"no-refund-promises": "local"}


def test_a_403_page_keeps_the_layout_and_says_why(bob: Any, acme: Tenant) -> None:
    answer = signed_in(bob).get("/guardrails/new/")
    html = answer.content.decode()
    assert answer.status_code == 403
    assert 'class="topbar' in html and "You may not do this here" in html and "author role" in html


def test_a_404_page_keeps_the_layout_and_says_why(charlie: Any, acme: Tenant, halt_guardrail: Any) -> None:
    run = Evaluation.objects.create(tenant=acme)
    answer = signed_in(charlie).get(f"/evaluations/{run.pk}/")
    html = answer.content.decode()
    assert answer.status_code == 404
    assert 'class="topbar' in html and "belongs to another tenant" in html
