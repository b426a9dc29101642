"""Violation review: allowed and refused moves, the history, the API (single, bulk, filter)
and the pages' review actions."""

from __future__ import annotations

from typing import Any

import pytest

from kindgi_console.tenancy.models import ApiKey, Tenant
from kindgi_console.tenancy.scoping import Caller
from tests.conftest import signed_in
from tests.traces import seed
from traces.models import Violation, ViolationReview
from traces.review import workflow as review


def test_the_allowed_moves() -> None:
    assert review.allowed("open", "acknowledged")
    assert review.allowed("acknowledged", "resolved")
    assert review.allowed("acknowledged", "false-positive")
    assert review.allowed("resolved", "open") and review.allowed("false-positive", "open")
    assert not review.allowed("resolved", "acknowledged")
    assert not review.allowed("false-positive", "resolved")
    assert not review.allowed("open", "open")
    assert review.refusal("resolved", "false-positive") == (
        "a resolved violation cannot become false-positive; it can become open"
    )


def test_a_review_moves_the_violation_and_records_the_change(acme: Tenant, bob: Any, halt_guardrail: Any) -> None:
    seed.traces(acme, 1)
    violation = seed.violations(acme)[0]
    caller = Caller(user=bob)
    review.review_one(violation.pk, "acknowledged", "looking", caller)
    review.review_one(violation.pk, "resolved", "fixed in 2.14", caller)
    violation.refresh_from_db()
    assert violation.state == "resolved" and violation.reviewed_by == bob
    assert violation.review_note == "fixed in 2.14" and violation.reviewed_at is not None
    history = list(
        ViolationReview.objects.filter(violation=violation)
        .order_by("pk")
        .values_list("from_state", "to_state", "note", "reviewer_label")
    )
    assert history == [("open", "acknowledged", "looking", "bob"), ("acknowledged", "resolved", "fixed in 2.14", "bob")]


def test_a_refused_move_changes_nothing(acme: Tenant, bob: Any, halt_guardrail: Any) -> None:
    seed.traces(acme, 1)
    violation = seed.violations(acme)[0]
    review.review_one(violation.pk, "false-positive", "", Caller(user=bob))
    with pytest.raises(review.ReviewError) as refused:
        review.review_one(violation.pk, "resolved", "", Caller(user=bob))
    assert refused.value.issues[0].path == "/state"
    assert "cannot become resolved" in refused.value.issues[0].message
    assert ViolationReview.objects.count() == 1


# ------------------------------------------------------------------ API


def test_bob_reviews_over_the_api(api: Any, acme: Tenant, bob: Any, halt_guardrail: Any) -> None:
    seed.traces(acme, 1)
    violation = seed.violations(acme)[0]
    url = f"/api/v1/violations/{violation.pk}/review"
    response = api(bob).post(url, {"state": "acknowledged", "note": "on it"}, format="json")
    assert response.status_code == 200
    assert response.json() == {"state": "acknowledged", "reviewed": [violation.pk], "refused": []}
    detail = api(bob).get(f"/api/v1/violations/{violation.pk}").json()
    assert detail["state"] == "acknowledged" and detail["reviewedBy"] == "bob"
    assert [(r["fromState"], r["toState"], r["note"]) for r in detail["reviews"]] == [("open", "acknowledged", "on it")]
    listed = api(bob).get("/api/v1/violations?state=acknowledged").json()["results"]
    assert [v["id"] for v in listed] == [violation.pk]
    assert api(bob).get("/api/v1/violations?state=open").json()["results"] == []


def test_a_refused_or_bad_review_is_400_naming_the_field(api: Any, acme: Tenant, bob: Any, halt_guardrail: Any) -> None:
    seed.traces(acme, 1)
    url = f"/api/v1/violations/{seed.violations(acme)[0].pk}/review"
    client = api(bob)
    cases = [
        ({"state": "open"}, "/state", "already open"),
        ({"state": "closed"}, "/state", "state is one of"),
        ({"state": "resolved", "note": 3}, "/note", "string"),
        ({"state": "resolved", "note": "x" * 2001}, "/note", "2000"),
        ({"state": "resolved", "colour": "red"}, "/colour", "unknown field"),
    ]
    for body, path, message in cases:
        response = client.post(url, body, format="json")
        assert response.status_code == 400, body
        error = response.json()["errors"][0]
        assert error["path"] == path and message in error["message"], body
    assert client.post(url, [], format="json").status_code == 400


def test_keys_need_the_review_scope(api: Any, acme: Tenant, acme_key: str, halt_guardrail: Any) -> None:
    seed.traces(acme, 1)
    url = f"/api/v1/violations/{seed.violations(acme)[0].pk}/review"
    response = api(acme_key).post(url, {"state": "acknowledged"}, format="json")
    assert response.status_code == 403  # read, ingest, evaluate: no review
    _, reviewer_key = ApiKey.issue(scopes=["read", "review"], tenant=acme, name="triage bot")
    response = api(reviewer_key).post(url, {"state": "acknowledged"}, format="json")
    assert response.status_code == 200
    assert ViolationReview.objects.get().reviewer_label == ApiKey.objects.get(name="triage bot").label


def test_charlie_cannot_review_acmes_violations(
    api: Any, acme: Tenant, charlie: Any, charlie_key: str, halt_guardrail: Any, globex: Tenant
) -> None:
    seed.traces(acme, 2)
    acme_ids = [v.pk for v in seed.violations(acme)]
    _, globex_reviewer = ApiKey.issue(scopes=["read", "review"], tenant=globex, name="globex")
    for outsider in (api(charlie), api(globex_reviewer)):
        response = outsider.post(f"/api/v1/violations/{acme_ids[0]}/review", {"state": "acknowledged"}, format="json")
        assert response.status_code == 404
        assert outsider.get(f"/api/v1/violations/{acme_ids[0]}").status_code == 404
        bulk = outsider.post("/api/v1/violations/review", {"ids": acme_ids, "state": "acknowledged"}, format="json")
        assert bulk.status_code == 200 and bulk.json()["reviewed"] == []
        by_filter = outsider.post(
            "/api/v1/violations/review", {"filter": {"tenant": "acme"}, "state": "resolved"}, format="json"
        )
        assert by_filter.json()["reviewed"] == []
    assert (
        api(charlie_key)
        .post(f"/api/v1/violations/{acme_ids[0]}/review", {"state": "resolved"}, format="json")
        .status_code
        == 403
    )
    assert set(Violation.objects.values_list("state", flat=True)) == {"open"}
    assert not ViolationReview.objects.exists()


def test_bulk_review_by_ids_and_by_filter(api: Any, acme: Tenant, bob: Any, halt_guardrail: Any) -> None:
    seed.traces(acme, 3, prefix="sup", agent="support-bot")
    seed.traces(acme, 2, prefix="bil", agent="billing-bot")
    client = api(bob)
    support = [v.pk for v in Violation.objects.filter(agent="support-bot").order_by("pk")]
    first = client.post(
        "/api/v1/violations/review", {"ids": support[:1], "state": "false-positive"}, format="json"
    ).json()
    assert first["reviewed"] == support[:1]
    response = client.post(
        "/api/v1/violations/review",
        {"filter": {"agent": "support-bot"}, "state": "resolved", "note": "prompt fixed"},
        format="json",
    )
    body = response.json()
    assert sorted(body["reviewed"]) == support[1:]
    assert body["refused"] == [
        {"id": support[0], "message": "a false-positive violation cannot become resolved; it can become open"}
    ]
    assert set(Violation.objects.filter(agent="billing-bot").values_list("state", flat=True)) == {"open"}
    assert ViolationReview.objects.filter(to_state="resolved", note="prompt fixed").count() == 2


def test_bulk_review_refuses_bad_selections(api: Any, acme: Tenant, bob: Any) -> None:
    client = api(bob)
    cases = [
        ({"state": "resolved"}, ""),
        ({"ids": [1], "filter": {}, "state": "resolved"}, ""),
        ({"ids": [], "state": "resolved"}, "/ids"),
        ({"ids": ["1"], "state": "resolved"}, "/ids"),
        ({"filter": {"colour": "red"}, "state": "resolved"}, "/filter/colour"),
        ({"filter": {"severity": "huge"}, "state": "resolved"}, "/filter/severity"),
        ({"filter": {"since": "yesterday"}, "state": "resolved"}, "/filter/since"),
        ({"filter": {"agent": 3}, "state": "resolved"}, "/filter/agent"),
    ]
    for body, path in cases:
        response = client.post("/api/v1/violations/review", body, format="json")
        assert response.status_code == 400, body
        assert response.json()["errors"][0]["path"] == path, body


# ------------------------------------------------------------------ pages


def test_bob_reviews_from_the_violation_page(acme: Tenant, bob: Any, halt_guardrail: Any) -> None:
    seed.traces(acme, 1)
    violation = seed.violations(acme)[0]
    client = signed_in(bob)
    page = client.get(f"/violations/{violation.pk}/").content.decode()
    assert "Acknowledge" in page and "Reopen" not in page
    response = client.post(
        f"/violations/{violation.pk}/review/", {"state": "acknowledged", "note": "<b>checking</b>"}, follow=True
    )
    assert "is now acknowledged" in response.content.decode()
    page = client.get(f"/violations/{violation.pk}/").content.decode()
    assert "&lt;b&gt;checking&lt;/b&gt;" in page and "Resolve" in page
    refused = client.post(
        f"/violations/{violation.pk}/review/", {"state": "acknowledged"}, follow=True
    ).content.decode()
    assert "Not changed: the violation is already acknowledged." in refused
    assert ViolationReview.objects.count() == 1


def test_bulk_review_from_the_list(acme: Tenant, bob: Any, halt_guardrail: Any) -> None:
    seed.traces(acme, 3, prefix="sup", agent="support-bot")
    seed.traces(acme, 2, prefix="bil", agent="billing-bot")
    client = signed_in(bob)
    ids = [v.pk for v in seed.violations(acme)]
    response = client.post(
        "/violations/review/",
        {"ids": ids[:2], "state": "acknowledged", "note": "batch", "scope": "selected"},
        follow=True,
    )
    assert "2 violations marked acknowledged." in response.content.decode()
    response = client.post(
        "/violations/review/", {"f-agent": "support-bot", "state": "resolved", "scope": "filter"}, follow=True
    )
    assert "3 violations marked resolved." in response.content.decode()
    assert Violation.objects.filter(state="resolved").count() == 3
    assert Violation.objects.filter(agent="billing-bot", state="open").count() == 2 - sum(
        1 for pk in ids[:2] if Violation.objects.get(pk=pk).agent == "billing-bot"
    )
    nothing = client.post("/violations/review/", {"state": "resolved", "scope": "selected"}, follow=True)
    assert "Tick at least one violation" in nothing.content.decode()


def test_charlie_cannot_review_from_the_pages(acme: Tenant, charlie: Any, halt_guardrail: Any) -> None:
    seed.traces(acme, 2)
    ids = [v.pk for v in seed.violations(acme)]
    client = signed_in(charlie)
    assert client.post(f"/violations/{ids[0]}/review/", {"state": "resolved"}).status_code == 404
    client.post("/violations/review/", {"ids": ids, "state": "resolved", "scope": "selected"})
    client.post("/violations/review/", {"state": "resolved", "scope": "filter"})
    assert set(Violation.objects.values_list("state", flat=True)) == {"open"}
