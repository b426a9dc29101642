"""The alert rule form in a real browser: the chosen kind's fields only, a refused save that
keeps what the author entered and ticked, and "Send a test" reaching a live receiver."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import expect

from alerts.models import AlertRule
from alerts.services import save_channel
from kindgi_console.tenancy.models import Tenant
from tests.alerts.receiver import Receiver
from tests.browser.test_authoring import PASSWORD, arrange


@pytest.fixture(autouse=True)
def _loopback_receivers(settings: Any) -> None:
    settings.KINDGI_ALERT_PRIVATE_URLS = True


@pytest.mark.django_db(transaction=True)
def test_an_author_writes_a_spend_rule_in_its_fields_and_tests_a_channel(
    page: Any, sign_in: Any, django_user_model: Any
) -> None:
    arrange(django_user_model)
    acme = Tenant.objects.get(slug="acme")
    with Receiver() as receiver:
        hook = save_channel(acme, {"name": "ops hook", "kind": "webhook", "url": receiver.url}, "fixture")
        receiver.secret = hook.secret
        sign_in("alice", PASSWORD)
        page.goto("/alerts/")
        violations, spend = page.locator("#rule-params-violations"), page.locator("#rule-params-spend")
        expect(violations).to_be_visible()
        expect(spend).to_be_hidden()
        page.select_option("#rule-kind", "spend")
        expect(spend).to_be_visible()
        expect(violations).to_be_hidden()
        page.fill("#rule-name", "judge spend")
        page.fill("#rule-spend-amountUsd", "-5")
        page.select_option("#rule-spend-period", "month")
        page.get_by_role("checkbox", name="ops hook (webhook)").check()
        page.get_by_role("button", name="Create rule").click()
        expect(page.get_by_role("alert")).to_contain_text("/params/amountUsd")
        # Refused: the kind, its fields and the tick are as the author left them.
        expect(page.locator("#rule-params-spend")).to_be_visible()
        expect(page.locator("#rule-spend-amountUsd")).to_have_value("-5")
        expect(page.locator("#rule-spend-period")).to_have_value("month")
        expect(page.get_by_role("checkbox", name="ops hook (webhook)")).to_be_checked()
        page.fill("#rule-spend-amountUsd", "25")
        page.get_by_role("button", name="Create rule").click()
        page.wait_for_url("**/alerts/")
        rule = AlertRule.objects.get(name="judge spend")
        assert rule.params == {"amountUsd": 25, "period": "month"}
        assert [c.name for c in rule.channels.all()] == ["ops hook"]
        page.get_by_role("button", name="Send a test to ops hook").click()
        expect(page.get_by_text("Test sent to ops hook: HTTP 200")).to_be_visible()
        (received,) = receiver.requests
        assert received.verified and received.json["type"] == "alert.test"
    assert page.script_errors == []
