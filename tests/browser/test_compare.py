"""A reviewer's "what broke since last week?" in a real browser: a run compared with each
guardrail's earlier results (the page computing, then reloading itself), a count followed to
the newly failing traces, and a run under the reviewer's judge limit started from the New
evaluation page with "Zero-llm guardrails only" and a date range."""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal
from typing import Any

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from guardrails.services import Author, save_guardrail
from tests.browser.conftest import screenshot
from tests.conftest import make_guardrail
from tests.traces.test_evaluations import run_for, store_traces
from tests.traces.test_judge_ledger import judge_guardrail, local_judge  # noqa: F401 (fixtures)
from traces.models import RunTrace

PASSWORD = "correct horse 42"


@pytest.mark.django_db(transaction=True)
def test_a_reviewer_compares_with_earlier_results_and_starts_a_zero_llm_run_with_dates(
    page: Any,
    sign_in: Any,
    bob: Any,
    acme: Any,
    halt_guardrail: Any,
    local_judge: Any,
    judge_guardrail: Any,
    monkeypatch: Any,
) -> None:
    from traces.runs import comparing, comparisons

    traces = store_traces(acme, 9)
    last_week = timezone.make_aware(datetime(2026, 11, 2, 12))
    RunTrace.objects.filter(pk__in=[t.pk for t in traces[:6]]).update(received_at=last_week)
    before = run_for(acme, guardrails=["no-refunds"])
    # The guardrail now forbids lookup_order too: every trace calls it, six newly fail.
    save_guardrail(make_guardrail(config={"tools": ["issue_refund", "lookup_order"]}), Author(user=None, label="t"))
    after = run_for(acme, guardrails=["no-refunds"])
    sent: list[int] = []
    monkeypatch.setattr(comparisons, "send", sent.append)  # computed below, while the page waits

    sign_in("bob", PASSWORD)
    page.goto(f"/evaluations/{after.pk}/")
    page.get_by_role("link", name="Compare with earlier results").click()
    page.get_by_text("Computing the comparison").wait_for()
    screenshot(page, "compare-computing")
    comparing.compute(sent[0])
    table = page.locator("#run-compare")  # the page reloads itself when the figures are complete
    table.wait_for()
    row = table.locator("tr[data-guardrail='no-refunds']")
    expect(row.locator("[data-count='newly-failing']")).to_have_text("6")
    expect(row.locator("[data-count='no-longer-failing']")).to_have_text("0")  # a zero is a link too
    expect(row.locator("[data-count='still-failing']")).to_have_text("3")
    assert f"run #{before.pk}" in row.inner_text() and "revision 1" in row.inner_text()
    screenshot(page, "compare")
    row.locator("[data-count='newly-failing']").click()
    page.get_by_role("heading", name="no-refunds: newly failing (6)").wait_for()
    listed = page.locator("#compare-traces tbody tr")
    expect(listed).to_have_count(6)
    assert f"run #{before.pk}, revision 1" in listed.first.inner_text()
    screenshot(page, "compare-newly-failing")

    acme.reviewer_judge_limit_usd = Decimal("0")  # every judge call is over bob's limit
    acme.save()
    page.goto("/evaluations/new/")
    expect(page.locator("[data-start-run]")).to_be_disabled()
    page.get_by_role("button", name="Zero-llm guardrails only").click()
    expect(page.get_by_label("no-refunds", exact=True)).to_be_checked()
    expect(page.get_by_label("no-refund-promises", exact=True)).not_to_be_checked()
    page.get_by_label("From").fill("2026-11-01")
    page.get_by_label("To").fill("2026-11-07")
    expect(page.locator("[data-selected-traces]")).to_have_text("6")  # the estimate follows the dates
    expect(page.locator("[data-no-judge]")).to_be_visible()
    expect(page.locator("[data-start-run]")).to_be_enabled()
    screenshot(page, "evaluation-new-zero-llm")
    page.get_by_role("button", name="Start evaluation").click()
    page.wait_for_url("**/evaluations/*/")
    page.locator("[data-progress-text]", has_text="6 / 6 (100%)").wait_for()
    assert page.script_errors == []
