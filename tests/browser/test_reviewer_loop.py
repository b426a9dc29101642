"""The reviewer's loop in a real browser: a reviewer starts a run (the count recomputes as the
filter changes), opens the failures from the run's counts, a failing trace's timeline, marks
the violation a false positive, and the guardrail's precision moves."""

from __future__ import annotations

from typing import Any

import pytest

from tests.browser.conftest import screenshot
from tests.traces.test_evaluations import store_traces

PASSWORD = "correct horse 42"


@pytest.mark.django_db(transaction=True)
def test_a_reviewer_walks_from_a_run_to_a_guardrails_precision(
    page: Any, sign_in: Any, bob: Any, acme: Any, halt_guardrail: Any
) -> None:
    store_traces(acme, 12)
    sign_in("bob", PASSWORD)
    page.goto("/evaluations/new/")
    page.get_by_label("no-refunds").check()
    assert page.locator("[data-selected-traces]").inner_text() == "12"
    page.get_by_label("Agent").fill("nobody")
    page.locator("[data-selected-traces]", has_text="0").wait_for()  # recomputed as typed
    page.get_by_label("Agent").fill("")
    page.locator("[data-selected-traces]", has_text="12").wait_for()
    page.get_by_role("button", name="Start evaluation").click()
    page.wait_for_url("**/evaluations/*/")
    page.locator("[data-progress-status]", has_text="succeeded").wait_for()
    page.reload()
    page.get_by_role("link", name="4 fail results of no-refunds").click()
    page.wait_for_url("**/results/?guardrail=no-refunds&status=fail")
    rows = page.locator("#run-results tbody tr")
    assert rows.count() == 4
    screenshot(page, "run-results-failures")
    rows.first.locator("td").first.get_by_role("link").click()
    page.wait_for_url("**/traces/*/")
    page.get_by_text("issue_refund").first.wait_for()
    screenshot(page, "failing-trace-timeline")
    page.go_back()
    page.goto("/guardrails/no-refunds/")
    assert "no review yet" in page.locator("[data-quality-overall] [data-precision]").inner_text()
    page.go_back()
    page.locator("#run-results tbody tr").first.get_by_role("link", name="open").click()
    page.wait_for_url("**/violations/*/")
    page.get_by_role("button", name="False positive").click()
    page.goto("/guardrails/no-refunds/#quality")
    precision = page.locator("[data-quality-overall] [data-precision]").inner_text()
    assert precision.startswith("0%"), precision
    screenshot(page, "guardrail-quality")
    page.goto("/guardrails/?sort=precision")
    assert page.get_by_role("columnheader", name="Precision").is_visible()
    assert page.script_errors == []
