"""An author's edit measured on the guardrail's labelled set, in a real browser: the guardrail
page counts the set and downloads it, Preview impact shows the draft's precision and recall on
it beside the current revision's, and a labelled trace the draft now gets wrong opens."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.browser.conftest import screenshot
from tests.traces.test_labelled_set import labelled  # noqa: F401  (a fixture)

PASSWORD = "correct horse 42"


@pytest.mark.django_db(transaction=True)
def test_an_author_sees_an_edit_break_a_labelled_trace(page: Any, sign_in: Any, alice: Any, labelled: Any) -> None:
    sign_in("alice", PASSWORD)
    page.goto("/guardrails/no-refunds/")
    assert page.locator("[data-labelled-count]").inner_text() == "5"
    with page.expect_download() as downloading:
        page.get_by_role("link", name="Download the labelled set (JSON Lines)").click()
    download = downloading.value
    assert download.suggested_filename == "no-refunds.labels.jsonl"
    lines = [json.loads(line) for line in Path(download.path()).read_text(encoding="utf-8").splitlines()]
    assert len(lines) == 5 and {line["tenant"] for line in lines} == {"acme"}

    page.get_by_role("link", name="Preview an edit").click()
    draft = page.get_by_label("Draft (guardrail JSON)")
    draft.fill(draft.input_value().replace('"issue_refund"', '"issue_refund", "lookup_order"'))
    page.get_by_role("button", name="Preview impact").click()
    page.wait_for_url("**/guardrails/previews/*/")
    page.locator("[data-progress-status]", has_text="succeeded").first.wait_for()
    page.reload()
    figures = page.locator("[data-labelled-figures]")
    figures.wait_for()
    draft_row, current_row = figures.locator("[data-labelled-draft]"), figures.locator("[data-labelled-current]")
    assert draft_row.locator("[data-labelled-precision]").inner_text().startswith("80%")
    assert draft_row.locator("[data-labelled-recall]").inner_text().startswith("100%")
    assert current_row.locator("[data-labelled-precision]").inner_text().startswith("100%")
    assert current_row.locator("[data-labelled-recall]").inner_text().startswith("75%")
    assert page.locator("[data-newly-wrong]").inner_text() == "1"
    screenshot(page, "preview-labelled-set")
    page.locator("[data-labelled-wrong]").get_by_role("link", name="run-00002").click()
    page.wait_for_url("**/traces/*/")
    page.get_by_text("run-00002").first.wait_for()
    assert page.script_errors == []
