"""An author saves an edit of an enforced zero-llm guardrail in shadow from the editor: the
enforced revision stays enforced beside it, the page says so, and Promote enforces it."""

from __future__ import annotations

from typing import Any

import pytest

from guardrails.models import Guardrail
from kindgi_console.audit.models import AuditEntry
from tests.browser.conftest import screenshot
from tests.browser.test_authoring import PASSWORD, arrange


@pytest.mark.django_db(transaction=True)
def test_an_edit_saved_in_shadow_stays_beside_the_enforced_revision_until_promoted(
    page: Any, sign_in: Any, django_user_model: Any
) -> None:
    arrange(django_user_model)
    before = Guardrail.objects.get(guardrail_id="no-refunds").revision
    sign_in("alice", PASSWORD)
    page.goto("/guardrails/no-refunds/edit/")
    page.wait_for_selector("#root_name")
    page.fill("#root_name", "Refunds and lookups need a human")
    page.get_by_role("button", name="Save in shadow").click()
    page.wait_for_url("**/guardrails/no-refunds/?saved=1")
    heading = f"Revision {before + 1} in shadow beside enforced revision {before}"
    page.get_by_role("heading", name=heading).wait_for()
    guardrail = Guardrail.objects.get(guardrail_id="no-refunds")
    assert (guardrail.revision, guardrail.shadow, guardrail.enforced_revision) == (before + 1, True, before)
    screenshot(page, "edit-in-shadow")

    # The editor of a guardrail in shadow saves in shadow.
    page.goto("/guardrails/no-refunds/edit/")
    page.wait_for_selector("#root_name")
    assert page.get_by_role("button", name="Save in shadow").count() == 1
    assert page.get_by_role("button", name="Save guardrail").count() == 0

    page.goto("/guardrails/no-refunds/")
    page.once("dialog", lambda dialog: dialog.accept())
    page.get_by_role("button", name=f"Promote revision {before + 1} to enforced").click()
    page.get_by_role("heading", name="Enforced", exact=True).wait_for()
    guardrail.refresh_from_db()
    assert (guardrail.shadow, guardrail.enforced_revision) == (False, None)
    assert AuditEntry.objects.filter(action="guardrail.promote", actor="alice").count() == 1
    assert page.script_errors == []
