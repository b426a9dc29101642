"""Review in a real browser: the review queue walked with the keyboard, chart bars that filter
the list, and the violation table's checkbox column."""

from __future__ import annotations

from typing import Any

import pytest
from django.utils import timezone
from playwright.sync_api import expect
from rest_framework.test import APIClient

from kindgi_console.tenancy.models import ApiKey, Tenant
from tests.browser.test_authoring import PASSWORD, arrange
from tests.conftest import make_trace
from traces.models import Violation


def more_violations(count: int) -> None:
    """`count` more runtime verdicts in acme, each a violation of no-refunds."""
    key = ApiKey.issue(scopes=["evaluate"], tenant=Tenant.objects.get(slug="acme"), name="more")[1]
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {key}")
    for n in range(count):
        trace = make_trace(f"queue-{n:03}", agent="support-bot")
        assert client.post("/api/v1/evaluate", trace, format="json").status_code == 200


def open_count() -> int:
    return Violation.objects.filter(tenant__slug="acme", state="open").count()


def counts_text(page: Any) -> str:
    return " ".join(page.locator("#queue-counts").inner_text().split())


@pytest.mark.django_db(transaction=True)
def test_review_next_walks_the_open_violations_with_the_keyboard(
    page: Any, sign_in: Any, django_user_model: Any
) -> None:
    arrange(django_user_model)
    more_violations(3)
    total = Violation.objects.filter(tenant__slug="acme").count()
    left = open_count()
    assert left >= 3, left
    sign_in("bob", PASSWORD)  # a reviewer
    page.goto("/violations/")
    page.get_by_role("link", name="Review next").click()
    page.wait_for_url("**/violations/queue/**")
    assert f"{left} open left to review" in counts_text(page)
    assert f"this is 1 of {left}" in counts_text(page)
    assert f"{total} violations match the filter" in counts_text(page)
    # The shortcuts are on the page, the trace's timeline beside the violation.
    keys = page.locator(".shortcuts").inner_text()
    for key in ["j", "k", "a", "r", "f", "n"]:
        assert key in keys
    assert page.locator(".timeline .timeline__item").count() >= 2
    first = page.locator("#what-title").inner_text()

    page.keyboard.press("j")
    page.wait_for_url("**at=*")
    assert "this is 2 of" in counts_text(page)
    page.keyboard.press("k")
    expect(page.locator("#queue-counts")).to_contain_text("this is 1 of")
    assert page.locator("#what-title").inner_text() == first

    page.keyboard.press("a")
    expect(page.locator("[data-queue-left]")).to_have_text(str(left - 1))
    assert open_count() == left - 1
    assert f"{left - 1} open left to review" in counts_text(page)
    reviewed = Violation.objects.get(pk=int(first.split("#")[1]))
    assert reviewed.state == "acknowledged"

    # n writes a note, Esc leaves it, r resolves with it; letters typed in the note do nothing.
    second = page.locator("#what-title").inner_text()
    page.keyboard.press("n")
    page.keyboard.type("refund was approved by a human")
    page.keyboard.press("Escape")
    page.keyboard.press("r")
    expect(page.locator("[data-queue-left]")).to_have_text(str(left - 2))
    resolved = Violation.objects.get(pk=int(second.split("#")[1]))
    assert resolved.state == "resolved" and resolved.review_note == "refund was approved by a human"
    assert open_count() == left - 2
    assert page.script_errors == []


@pytest.mark.django_db(transaction=True)
def test_the_queue_follows_the_filter_and_ends(page: Any, sign_in: Any, django_user_model: Any) -> None:
    arrange(django_user_model)
    more_violations(2)
    sign_in("bob", PASSWORD)
    agent_open = Violation.objects.filter(tenant__slug="acme", state="open", agent="support-bot").count()
    page.goto("/violations/?agent=support-bot")
    page.get_by_role("link", name="Review next").click()
    assert f"{agent_open} open left to review" in counts_text(page)
    for left in range(agent_open, 0, -1):
        page.keyboard.press("f")
        expect(page.locator("[data-queue-left]")).to_have_text(str(left - 1))
    page.wait_for_selector("text=Every open violation of this filter is reviewed")
    assert not Violation.objects.filter(tenant__slug="acme", state="open", agent="support-bot").exists()


@pytest.mark.django_db(transaction=True)
def test_a_chart_bar_filters_the_list_to_its_day_and_severity(page: Any, sign_in: Any, django_user_model: Any) -> None:
    arrange(django_user_model)
    sign_in("alice", PASSWORD)
    page.goto("/violations/")
    canvas = page.locator("canvas[data-chart-series='severity']")
    page.wait_for_selector("canvas[data-chart-series='severity'][data-chart-ready='true']")
    # The bars grow for 250 ms after the chart is ready: a click aimed at where a bar ends
    # up can miss it while it grows. Wait until every bar stands where it ends.
    page.wait_for_function("""() => {
        const chart = window.KindgiCharts.chartOf(document.querySelector("canvas[data-chart-series='severity']"));
        return chart.data.datasets.every((_, d) => chart.getDatasetMeta(d).data.every((bar) => {
            const end = bar.getProps(["x", "y", "base"], true);
            return bar.x === end.x && bar.y === end.y && bar.base === end.base;
        }));
    }""")
    point = page.evaluate("""() => {
        const canvas = document.querySelector("canvas[data-chart-series='severity']");
        const chart = window.KindgiCharts.chartOf(canvas);
        for (let d = 0; d < chart.data.datasets.length; d++) {
            const meta = chart.getDatasetMeta(d);
            for (let i = 0; i < meta.data.length; i++) {
                if (chart.data.datasets[d].data[i] > 0) {
                    const bar = meta.data[i];
                    return {x: bar.x, y: (bar.y + bar.base) / 2, label: chart.data.datasets[d].label,
                            day: chart.data.labels[i]};
                }
            }
        }
        return null;
    }""")
    assert point, "no bar drawn"
    canvas.click(position={"x": point["x"], "y": point["y"]})
    page.wait_for_url(f"**/violations/?*severity={point['label']}*")
    url = page.url
    assert f"since={point['day']}" in url and f"until={point['day']}" in url
    shown = page.locator("tbody tr").count()
    expected = Violation.objects.filter(
        tenant__slug="acme", severity=point["label"], created_at__date=timezone.localdate()
    ).count()
    assert shown == expected > 0
    assert page.locator("#id_severity").input_value() == point["label"]


@pytest.mark.django_db(transaction=True)
def test_the_checkbox_cell_is_as_tall_as_its_row(page: Any, sign_in: Any, django_user_model: Any) -> None:
    arrange(django_user_model)
    sign_in("alice", PASSWORD)
    page.goto("/violations/")
    heights = page.evaluate("""() => [...document.querySelectorAll('tbody tr')].map(
        (row) => [row.getBoundingClientRect().height, row.querySelector('td.check').getBoundingClientRect().height])""")
    assert heights
    for row, cell in heights:
        assert abs(row - cell) < 1, heights
