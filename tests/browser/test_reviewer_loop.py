"""The reviewer's loop in a real browser: a reviewer starts a run (the count recomputes as the
filter changes), opens the failures from the run's counts, a failing trace's timeline, marks
the violation a false positive, and the guardrail's precision moves."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import expect

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
    page.locator("[data-progress-status]", has_text="succeeded").first.wait_for()
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


@pytest.mark.django_db(transaction=True)
def test_an_author_previews_an_edit_then_shadows_and_promotes_a_judge(
    page: Any, sign_in: Any, alice: Any, acme: Any, acme_guardrail: Any
) -> None:
    from guardrails.models import Guardrail
    from guardrails.services import Author, save_guardrail
    from tests.traces.test_judge_ledger import judge_document

    store_traces(acme, 12)
    save_guardrail(judge_document(), Author(user=None, label="t"), owner=acme)
    sign_in("alice", PASSWORD)
    page.goto("/guardrails/no-refunds/")
    page.get_by_role("link", name="Preview an edit").click()
    draft = page.get_by_label("Draft (guardrail JSON)")
    draft.fill(draft.input_value().replace('"issue_refund"', '"issue_refund", "lookup_order"'))
    page.get_by_role("button", name="Preview impact").click()
    page.wait_for_url("**/guardrails/previews/*/")
    page.locator("[data-progress-status]", has_text="succeeded").first.wait_for()
    page.reload()
    assert page.locator("[data-newly-failing]").inner_text() == "8"
    screenshot(page, "preview-impact")
    page.goto("/guardrails/no-refund-promises/")
    page.get_by_label("Sample, % of matching traces (empty: all)").fill("25")
    page.get_by_role("button", name="Put in shadow").click()
    page.get_by_role("heading", name="In shadow").wait_for()
    assert Guardrail.objects.get(guardrail_id="no-refund-promises").shadow_sample_rate == 0.25
    screenshot(page, "judge-in-shadow")
    page.once("dialog", lambda dialog: dialog.accept())
    page.get_by_role("button", name="Promote revision 1 to enforced").click()
    page.get_by_role("heading", name="Enforced", exact=True).wait_for()
    assert not Guardrail.objects.get(guardrail_id="no-refund-promises").shadow
    assert page.script_errors == []


@pytest.mark.django_db(transaction=True)
def test_the_editors_preview_button_posts_the_unsaved_draft(
    page: Any, sign_in: Any, alice: Any, acme: Any, acme_guardrail: Any
) -> None:
    sign_in("alice", PASSWORD)
    page.goto("/guardrails/no-refunds/edit/")
    page.get_by_role("button", name="Preview impact").wait_for()
    with page.expect_popup() as opened:
        page.get_by_role("button", name="Preview impact").click()
    preview = opened.value
    preview.wait_for_load_state()
    assert '"no-refunds"' in preview.get_by_label("Draft (guardrail JSON)").input_value()
    assert page.script_errors == []


@pytest.mark.django_db(transaction=True)
def test_a_reviewer_calibrates_a_judge_with_the_keyboard(page: Any, sign_in: Any, bob: Any, acme: Any) -> None:
    from tests.traces.test_calibration import judge_with_verdicts

    judge_with_verdicts(acme)
    sign_in("bob", PASSWORD)
    page.goto("/guardrails/no-refund-promises/#calibration")
    page.get_by_label("Traces to label").fill("10")
    page.get_by_role("button", name="Draw a calibration sample").click()
    page.wait_for_url("**/calibrations/*/")
    for n in range(10):
        page.get_by_text(f"trace {n + 1} of 10").wait_for()
        assert "judge says" not in page.content()  # the judge's verdict stays hidden
        expect(page.get_by_role("button", name="Pass")).to_be_focused()  # autofocus, once rendered
        page.keyboard.press("f" if n % 4 == 3 else "p")  # single keys, as in the review queue
    page.wait_for_url("**/guardrails/no-refund-promises/**")
    page.locator("[data-agreement]").wait_for()
    assert page.locator("[data-accuracy]").inner_text().endswith("%")
    assert page.locator("[data-calibrated-precision]").inner_text().endswith("%")
    # After labelling, each disagreement shows the judge's verdict and its reason beside it.
    assert "judge says" in page.locator("[data-disagreements]").inner_text()
    screenshot(page, "judge-agreement")
    assert page.script_errors == []
