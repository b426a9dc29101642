"""A turn exported by the OpenTelemetry SDK, seen in a real browser: the page says it came over OTLP."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import Page, expect

from kindgi_console.tenancy.models import ApiKey, Tenant
from tests.browser.conftest import screenshot
from tests.traces.otlp_turn import Recorder, exporter, hex_ids, record_agent_turn
from traces import demo
from traces.models import RunTrace


@pytest.mark.django_db(transaction=True)
def test_the_trace_page_shows_an_otlp_turn_with_its_span_ids(page: Page, live_server: Any, sign_in: Any) -> None:
    demo.ensure_people()
    key = ApiKey.issue(scopes=["ingest"], tenant=Tenant.objects.get(slug="acme"), name="otel")[1]
    recorder = Recorder()
    record_agent_turn(recorder)
    exporter(live_server.url, key).export(recorder.spans)
    trace = RunTrace.objects.get()

    sign_in("acme-reviewer", demo.PASSWORD)
    page.goto(f"/traces/{trace.pk}/")

    expect(page.get_by_text("Received over")).to_be_visible()
    expect(page.locator("dd", has_text=hex_ids(recorder.spans[-1])[1]).first).to_be_visible()
    expect(page.get_by_text("search_policies").first).to_be_visible()
    screenshot(page, "otlp-trace")
    assert page.script_errors == []  # type: ignore[attr-defined]
