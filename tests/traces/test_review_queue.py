"""The review queue page: its order, counts and scoping (the browser walk is in tests/browser)."""

from __future__ import annotations

from typing import Any

from kindgi_console.tenancy.models import Tenant
from tests.conftest import signed_in
from tests.traces import seed
from traces.models import Violation


def test_the_queue_shows_the_newest_open_violation_and_counts(bob: Any, acme: Tenant, halt_guardrail: Any) -> None:
    seed.traces(acme, 3)
    newest, middle, oldest = Violation.objects.order_by("-created_at", "-pk")
    Violation.objects.filter(pk=oldest.pk).update(state="resolved")
    page = signed_in(bob).get("/violations/queue/")
    assert page.context["violation"].pk == newest.pk
    assert (page.context["left"], page.context["matching"], page.context["position"]) == (2, 3, 1)
    assert page.context["next_url"].endswith(f"at={middle.pk}") and page.context["previous_url"] == ""
    after = signed_in(bob).get(f"/violations/queue/?after={newest.pk}")
    assert after.context["violation"].pk == middle.pk


def test_the_queue_keeps_the_list_filter_but_its_state(bob: Any, acme: Tenant, halt_guardrail: Any) -> None:
    seed.traces(acme, 2)
    page = signed_in(bob).get("/violations/queue/?state=resolved&severity=info")
    assert page.context["violation"] is None and page.context["left"] == 0
    assert "Every open violation of this filter is reviewed" in page.content.decode()
    assert "state=" not in page.context["list_url"]


def test_charlie_gets_nothing_of_acmes_queue(charlie: Any, acme: Tenant, halt_guardrail: Any) -> None:
    seed.traces(acme, 2)
    violation = Violation.objects.first()
    client = signed_in(charlie)
    assert client.get(f"/violations/queue/?at={violation.pk}").status_code == 404
    page = client.get("/violations/queue/")
    assert page.context["violation"] is None and page.context["matching"] == 0
    response = client.post(f"/violations/{violation.pk}/review/", {"state": "resolved", "next": "/violations/queue/"})
    assert response.status_code == 404
    assert Violation.objects.get(pk=violation.pk).state == "open"


def test_a_run_that_took_seconds_says_seconds() -> None:
    from datetime import datetime, timedelta

    from traces.runs.views import took

    start = datetime(2026, 11, 30, 12, 0, 0)
    assert took(start, start + timedelta(seconds=8)) == "8 seconds"
    assert took(start, start + timedelta(seconds=61)) == "1 minute 1 second"
    assert took(start, start + timedelta(hours=2, minutes=3, seconds=4)) == "2 hours 3 minutes"
    assert took(start, start) == "under a second" and took(None, start) == ""


def test_past_the_count_cap_the_queue_says_how_many_at_least(
    bob: Any, acme: Tenant, halt_guardrail: Any, settings: Any
) -> None:
    """Counts stop at KINDGI_PAGE_COUNT_CAP (the page then costs the same at any table size):
    past it the page says "3+", never a figure it did not count."""
    settings.KINDGI_PAGE_COUNT_CAP = 3
    seed.traces(acme, 5)
    page = signed_in(bob).get("/violations/queue/")
    left, matching = page.context["left"], page.context["matching"]
    assert (left.value, left.more, matching.value, matching.more) == (3, True, 3, True)
    assert page.context["position"] == 1
    text = " ".join(page.content.decode().split())
    assert "3+</strong> open left to review" in text and "3+</strong> violations match the filter" in text
    settings.KINDGI_PAGE_COUNT_CAP = 5
    exact = signed_in(bob).get("/violations/queue/")
    assert (exact.context["left"], exact.context["matching"]) == (5, 5)
    assert "5</strong> open left to review" in " ".join(exact.content.decode().split())
