"""Evaluations and uploads in a real browser: start a run, watch it reach 100 %, upload a file."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from tests.browser.conftest import screenshot
from tests.conftest import make_trace
from tests.traces.test_evaluations import store_traces

PASSWORD = "correct horse 42"


@pytest.mark.django_db(transaction=True)
def test_an_author_starts_a_run_and_watches_it_finish(
    page: Any, sign_in: Any, alice: Any, acme: Any, halt_guardrail: Any
) -> None:
    store_traces(acme, 60)
    sign_in("alice", PASSWORD)
    page.goto("/evaluations/")
    screenshot(page, "evaluations-empty")
    page.get_by_role("link", name="New evaluation").first.click()
    page.get_by_label("no-refunds").check()
    assert page.locator("[data-selected-traces]").inner_text() == "60"
    screenshot(page, "evaluation-new")
    page.get_by_role("button", name="Start evaluation").click()
    page.wait_for_url("**/evaluations/*/")
    progress = page.locator("[data-progress-text]")
    progress.filter(has_text="60 / 60 (100%)").wait_for()
    page.locator("[data-progress-status]", has_text="succeeded").first.wait_for()
    screenshot(page, "evaluation-detail")
    page.goto("/evaluations/")
    assert page.locator("table").get_by_text("succeeded").count() == 1
    screenshot(page, "evaluations")
    assert page.script_errors == []


@pytest.mark.django_db(transaction=True)
def test_an_author_uploads_a_file_and_sees_its_bad_lines(
    page: Any, sign_in: Any, alice: Any, acme: Any, halt_guardrail: Any, tmp_path: Path
) -> None:
    lines = [orjson.dumps(make_trace(f"up-{n}")) for n in range(20)]
    lines.insert(5, b'{"id": "broken", "toolcalls": []}')
    lines.insert(9, b"{not json")
    file = tmp_path / "traces.jsonl"
    file.write_bytes(b"\n".join(lines) + b"\n")
    sign_in("alice", PASSWORD)
    page.goto("/uploads/new/")
    screenshot(page, "upload-new")
    page.get_by_label("Trace file").set_input_files(str(file))
    page.get_by_label("Start an evaluation").check()
    page.get_by_role("button", name="Upload").click()
    page.wait_for_url("**/uploads/*/")
    page.locator("[data-progress-status]", has_text="succeeded").wait_for()
    assert page.get_by_text("line 6").is_visible() and page.get_by_text("line 10").is_visible()
    screenshot(page, "upload-detail")
    page.get_by_role("link", name="Its evaluation").click()
    page.locator("[data-progress-text]", has_text="20 / 20").wait_for()
    page.goto("/uploads/")
    screenshot(page, "uploads")
    assert page.script_errors == []


@pytest.mark.django_db(transaction=True)
def test_the_run_card_says_what_the_progress_bar_says(
    page: Any, sign_in: Any, alice: Any, acme: Any, halt_guardrail: Any
) -> None:
    from traces.models import Evaluation

    run = Evaluation.objects.create(tenant=acme, status="queued", total=1000)
    sign_in("alice", PASSWORD)
    page.goto(f"/evaluations/{run.pk}/")
    Evaluation.objects.filter(pk=run.pk).update(status="running", done=250)
    pills = page.locator("[data-progress-status]")
    assert pills.count() == 2  # the bar's and the run card's
    for index in range(2):
        pills.nth(index).filter(has_text="running").wait_for()
    assert page.locator(".dl").get_by_text("queued").count() == 0
    assert page.script_errors == []
