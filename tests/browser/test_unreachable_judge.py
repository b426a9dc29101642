"""An author whose judge cannot be reached: the editor and the preview form show what the draft
would cost, Try it ends with the judge's error instead of "Running…", and the preview ends
failed, saying why, instead of sitting at a percentage."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from guardrails.services import Author, save_guardrail
from kindgi_console.tenancy.models import Tenant
from tests.browser.conftest import screenshot
from tests.browser.test_authoring import PASSWORD, arrange
from tests.conftest import make_trace
from tests.traces.test_evaluations import store_traces
from tests.traces.test_judge_ledger import judge_document
from tests.traces.test_preview_estimate import unreachable_judge
from traces.models import RunTrace

#: Longer than Try it's time limit (KINDGI_EVALUATE_TIME_LIMIT_S, 30 s) and the panel's own.
WAIT_MS = 60_000


@pytest.mark.django_db(transaction=True)
def test_try_it_and_a_preview_with_an_unreachable_judge_end_with_a_clear_error(
    page: Any, sign_in: Any, django_user_model: Any
) -> None:
    arrange(django_user_model)
    acme = Tenant.objects.get(slug="acme")
    unreachable_judge()
    save_guardrail(judge_document(), Author(user=None, label="t"), owner=acme)
    store_traces(acme, 6)
    sign_in("alice", PASSWORD)

    page.goto("/guardrails/no-refund-promises/edit/")
    page.wait_for_selector("#root_name")
    cost = page.locator("[data-judge-cost]")
    cost.wait_for()
    assert "Try it on the newest trace: 1 judge call, at most $" in cost.inner_text()
    recent = RunTrace.objects.filter(tenant=acme, received_at__gte=timezone.now() - timedelta(days=7)).count()
    # The draft beside its current revision: two judgements a trace.
    assert f"Preview impact over {recent} traces: {2 * recent} judge calls" in cost.inner_text()

    page.fill("#kg-try-trace", json.dumps(make_trace("try-1", tenant="acme", toolCalls=[])))
    page.get_by_role("button", name="Run against this trace").click()
    page.get_by_text("could not reach the judge provider").first.wait_for(timeout=WAIT_MS)
    assert page.get_by_role("button", name="Run against this trace").is_enabled()
    screenshot(page, "try-unreachable-judge")

    page.goto("/guardrails/previews/new/?guardrail=no-refund-promises")
    assert "Judge calls" in page.locator("[data-judge-estimate]").inner_text()
    page.locator("form button[name=start]").click()
    page.wait_for_url("**/guardrails/previews/*/")
    page.get_by_text("the judge could not be reached").first.wait_for(timeout=WAIT_MS)
    assert "failed" in page.locator("[data-progress-status]").first.inner_text()
    screenshot(page, "preview-unreachable-judge")
    assert page.script_errors == []
