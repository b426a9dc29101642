"""Traces, violations and the ledger in a real browser: review, the chart, hostile content."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import Dialog, Page, expect

from kindgi_console.tenancy.models import Tenant
from tests.browser.conftest import screenshot
from tests.traces import seed
from traces import demo
from traces.models import RunTrace, Violation, ViolationReview

HOSTILE_OUTPUT = "Done <script>alert('owned')</script> <img src=x onerror=alert(1)>"


@pytest.fixture
def people(db: Any) -> dict[str, Any]:
    """The demo's tenants and people (acme-reviewer, globex-reviewer, ...)."""
    return demo.ensure_people()


def arrange(halt_guardrail: Any) -> tuple[Tenant, Tenant]:
    acme, globex = Tenant.objects.get(slug="acme"), Tenant.objects.get(slug="globex")
    seed.traces(acme, 4, prefix="acme-run")
    seed.traces(globex, 3, prefix="globex-run")
    seed.ledger(acme, 5)
    return acme, globex


def watch_dialogs(page: Page) -> list[str]:
    dialogs: list[str] = []

    def dismiss(dialog: Dialog) -> None:
        dialogs.append(dialog.message)
        dialog.dismiss()

    page.on("dialog", dismiss)
    return dialogs


@pytest.mark.django_db(transaction=True)
def test_acme_reviewer_sees_only_acme_and_reviews_a_violation(
    page: Page, sign_in: Any, people: Any, halt_guardrail: Any
) -> None:
    arrange(halt_guardrail)
    sign_in("acme-reviewer", demo.PASSWORD)
    page.goto("/violations/")
    table = page.locator("table")
    expect(table).to_contain_text("acme-run-acme-0000")
    expect(table).not_to_contain_text("globex-run")
    expect(page.locator("canvas[data-chart-ready='true']").first).to_be_visible()
    screenshot(page, "violations")

    page.locator("table tbody tr").first.get_by_role("link").first.click()
    page.get_by_label("Note").fill("Checked with the support lead")
    page.get_by_role("button", name="Acknowledge").click()
    expect(page.get_by_text("is now acknowledged")).to_be_visible()
    expect(page.locator(".page-header .pill--acknowledged")).to_be_visible()
    expect(page.get_by_role("cell", name="Checked with the support lead")).to_be_visible()
    screenshot(page, "violation-detail")
    change = ViolationReview.objects.get()
    assert (change.from_state, change.to_state, change.reviewer_label) == ("open", "acknowledged", "acme-reviewer")
    assert page.script_errors == []  # type: ignore[attr-defined]


@pytest.mark.django_db(transaction=True)
def test_bulk_review_of_the_selected_violations(page: Page, sign_in: Any, people: Any, halt_guardrail: Any) -> None:
    arrange(halt_guardrail)
    sign_in("acme-reviewer", demo.PASSWORD)
    page.goto("/violations/")
    page.get_by_label("Select every violation on this page").check()
    expect(page.get_by_text("4 selected")).to_be_visible()
    page.locator("#bulk-state").select_option("false-positive")
    page.get_by_role("button", name="Apply to selected").click()
    expect(page.get_by_text("4 violations marked false-positive.")).to_be_visible()
    assert set(Violation.objects.filter(tenant__slug="acme").values_list("state", flat=True)) == {"false-positive"}
    assert set(Violation.objects.filter(tenant__slug="globex").values_list("state", flat=True)) == {"open"}


@pytest.mark.django_db(transaction=True)
def test_the_ledger_chart_renders_with_data(page: Page, sign_in: Any, people: Any, halt_guardrail: Any) -> None:
    arrange(halt_guardrail)
    sign_in("acme-reviewer", demo.PASSWORD)
    page.goto("/ledger/")
    canvas = page.locator("canvas[data-chart-source='ledger-chart']")
    expect(canvas).to_have_attribute("data-chart-ready", "true")
    assert int(canvas.get_attribute("data-chart-points") or 0) > 0
    expect(page.locator("[data-ledger-total]")).to_have_text("0.006250")
    screenshot(page, "ledger")
    assert page.script_errors == []  # type: ignore[attr-defined]


@pytest.mark.django_db(transaction=True)
def test_hostile_trace_content_renders_as_text_and_runs_nothing(
    page: Page, sign_in: Any, people: Any, halt_guardrail: Any
) -> None:
    acme, _ = arrange(halt_guardrail)
    trace = seed.traces(
        acme,
        1,
        prefix="hostile",
        output=HOSTILE_OUTPUT,
        messages=[{"role": "user", "content": "<b>bold?</b>"}, {"role": "assistant", "content": HOSTILE_OUTPUT}],
        toolCalls=[
            {
                "id": "c1",
                "name": "issue_refund",
                "arguments": {"q": "<script>alert(2)</script>"},
                "result": "<img src=y onerror=alert(3)>",
            }
        ],
        citations=[
            {"source": "javascript:alert('citation')", "title": "Click me"},
            {"source": "https://example.org/policy", "title": "Real policy"},
        ],
    )[0]
    RunTrace.objects.filter(pk=trace.pk).update(withheld=True)
    dialogs = watch_dialogs(page)
    sign_in("acme-reviewer", demo.PASSWORD)
    page.goto("/traces/")
    expect(page.get_by_text("hostile-acme-0000")).to_be_visible()
    screenshot(page, "trace-list")
    page.goto(f"/traces/{trace.pk}/")
    expect(page.get_by_text(HOSTILE_OUTPUT).first).to_be_visible()
    expect(page.get_by_text("<b>bold?</b>", exact=True)).to_be_visible()
    expect(page.locator(".toolcall pre", has_text="<img src=y onerror=alert(3)>")).to_be_visible()
    expect(page.get_by_text("javascript:alert('citation')", exact=True)).to_be_visible()
    expect(page.locator(".withheld")).to_contain_text("Response withheld")
    # What is kept and what is not, in so many words, next to the kept assistant message.
    expect(page.locator(".withheld")).to_contain_text("Not stored: the trace's output")
    expect(page.locator(".withheld")).to_contain_text(
        "the last assistant message above is the response that was withheld"
    )
    assert page.locator("a[href^='javascript']").count() == 0
    assert page.locator("main script, main img, main b").count() == 0
    link = page.get_by_role("link", name="https://example.org/policy")
    expect(link).to_have_attribute("rel", "noopener noreferrer nofollow")
    screenshot(page, "trace-detail")
    page.get_by_text("javascript:alert('citation')", exact=True).click()
    page.evaluate("() => new Promise(requestAnimationFrame)")  # the click's handlers have run
    assert dialogs == []
    assert page.script_errors == []  # type: ignore[attr-defined]
