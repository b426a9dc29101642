"""A review queue in a real browser: a reviewer picks the queue an escalate guardrail names on
the review queue's bar, claims the violation shown with `c`, and a second reviewer, in a
browser of her own, sees it claimed by him and cannot claim it."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import expect

from guardrails.services import Author, save_guardrail
from kindgi_console.tenancy.models import Membership, Tenant
from tests.browser.test_authoring import PASSWORD, arrange
from tests.browser.test_review_queue import more_violations
from tests.conftest import make_guardrail
from traces.models import Violation

QUEUE = "research-leads"


def counts_text(page: Any) -> str:
    return " ".join(page.locator("#queue-counts").inner_text().split())


@pytest.mark.django_db(transaction=True)
def test_a_reviewer_claims_from_a_queue_and_another_sees_it_claimed(
    page: Any, sign_in: Any, browser: Any, live_server: Any, django_user_model: Any
) -> None:
    arrange(django_user_model)
    acme = Tenant.objects.get(slug="acme")
    erin = django_user_model.objects.create_user("erin", "erin@example.org", PASSWORD)
    Membership.objects.create(user=erin, tenant=acme, role="reviewer")
    escalate = {"on-violation": "escalate", "escalateTo": QUEUE}
    save_guardrail(make_guardrail("refunds-to-leads", action=escalate), Author(user=None, label="fixture"), owner=acme)
    more_violations(2)  # each: a halt of no-refunds, and one in the research-leads queue
    queued = list(Violation.objects.filter(queue=QUEUE).order_by("-created_at", "-pk"))
    everything_open = Violation.objects.filter(tenant=acme, state="open").count()
    assert len(queued) == 2 and everything_open > 2

    sign_in("bob", PASSWORD)
    page.goto("/")
    expect(page.locator(f"tr[data-queue='{QUEUE}']")).to_contain_text("2")
    page.goto("/violations/queue/")
    assert f"{everything_open} open left to review" in counts_text(page)
    page.get_by_label("Queue", exact=True).select_option(QUEUE)  # the bar submits itself on a change
    page.wait_for_url(f"**/violations/queue/?*queue={QUEUE}*")
    assert "2 open left to review" in counts_text(page)
    expect(page.locator("#what-title")).to_have_text(f"Violation #{queued[0].pk}")
    expect(page.locator("[data-claim-status]")).to_contain_text("Nobody holds it")

    page.keyboard.press("c")
    expect(page.locator("[data-claim-status]")).to_contain_text("You hold it")
    assert f"at={queued[0].pk}" in page.url
    assert Violation.objects.get(pk=queued[0].pk).assignee == "bob"

    other = browser.new_context(base_url=live_server.url, viewport={"width": 1440, "height": 900})
    try:
        second = other.new_page()
        second.set_default_timeout(15_000)
        second.goto("/login/")
        second.get_by_label("Username").fill("erin")
        second.get_by_label("Password").fill(PASSWORD)
        second.get_by_role("button", name="Sign in").click()
        second.wait_for_url(lambda url: "/login/" not in url)
        second.goto(f"/violations/queue/?queue={QUEUE}")
        expect(second.locator("#what-title")).to_have_text(f"Violation #{queued[0].pk}")
        expect(second.locator("[data-assignee]")).to_have_text("bob")
        expect(second.get_by_role("button", name="Claim it")).to_have_count(0)
        second.get_by_label("Claimed by").select_option("none")
        second.wait_for_url("**assignee=none*")
        assert "1 open left to review" in " ".join(second.locator("#queue-counts").inner_text().split())
        expect(second.locator("#what-title")).to_have_text(f"Violation #{queued[1].pk}")
        second.get_by_role("button", name="Claim it").click()
        expect(second.locator("[data-claim-status]")).to_contain_text("You hold it")
    finally:
        other.close()
    assert list(
        Violation.objects.filter(queue=QUEUE).order_by("-created_at", "-pk").values_list("assignee", flat=True)
    ) == ["bob", "erin"]
    assert page.script_errors == []
