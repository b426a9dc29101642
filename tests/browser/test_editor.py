"""The guardrail editor as an author lives in it: sections stay open, the form shows what the
chosen kind uses, errors wait for a touch or a save and show once, saves are confirmed, the
save bar never hides the focused field, and an old revision can be restored."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import expect

from guardrails.models import Guardrail
from tests.browser.conftest import screenshot as save_screenshot
from tests.browser.test_authoring import PASSWORD, arrange, choose, raw_json


def new_form(page: Any, sign_in: Any, django_user_model: Any) -> None:
    arrange(django_user_model)
    sign_in("alice", PASSWORD)
    page.goto("/guardrails/new/")
    page.wait_for_selector("#root_id")


def server_check(response: Any) -> bool:
    """The editor's check of the document by the server (a moment after each change)."""
    return response.url.endswith("/api/v1/guardrails/validate")


def checked(page: Any) -> None:
    """Wait for the editor to show the server's answer."""
    expect(page.get_by_text("Checking with the server")).to_have_count(0)


def open_advanced(page: Any) -> None:
    details = page.locator("details.kg-advanced")
    if details.get_attribute("open") is None:
        details.locator("summary").click()


@pytest.mark.django_db(transaction=True)
def test_an_empty_new_form_shows_no_error_until_a_field_is_touched_or_saved(
    page: Any, sign_in: Any, django_user_model: Any
) -> None:
    with page.expect_response(server_check):
        new_form(page, sign_in, django_user_model)
    checked(page)
    body = page.locator(".kg-editor").inner_text()
    assert "Required." not in body and "is required" not in body and "server error" not in body, body
    assert page.locator(".kg-editor .error-detail").count() == 0
    page.get_by_role("button", name="Save guardrail").click()
    error = page.locator("#root_id__error")
    error.wait_for()
    # One message at the field, not the browser's and the server's in two wordings.
    assert page.locator("#root_id__error li").count() == 1, error.inner_text()
    assert "required" in error.inner_text().lower()
    assert page.locator(".kg-server-problems").filter(has_text="/id").count() == 0
    assert page.script_errors == []


@pytest.mark.django_db(transaction=True)
def test_a_section_the_author_opens_stays_open(page: Any, sign_in: Any, django_user_model: Any) -> None:
    new_form(page, sign_in, django_user_model)
    open_advanced(page)
    page.locator("#root_scope").get_by_role("button", name="Add").first.click()
    page.wait_for_selector("#root_scope_when")
    page.locator("#root_budget").get_by_role("button", name="Add").first.click()
    page.wait_for_selector("#root_budget_maxCostUsd")
    with page.expect_response(server_check):
        page.fill("#root_name", "Budgeted")
    checked(page)
    assert page.locator("#root_budget_maxCostUsd").is_visible()
    assert page.locator("#root_scope_when").is_visible()
    page.fill("#root_budget_maxCostUsd", "0.02")
    assert page.locator("#root_scope_when").is_visible()
    assert page.script_errors == []


@pytest.mark.django_db(transaction=True)
def test_the_form_shows_what_the_kind_uses_and_folds_the_rest(page: Any, sign_in: Any, django_user_model: Any) -> None:
    new_form(page, sign_in, django_user_model)
    kinds = page.locator("select#root_kind option").all_inner_texts()
    assert "zero-llm" in kinds and "llm-judge" in kinds, kinds
    assert page.locator("details.kg-advanced").get_attribute("open") is None
    for hidden in ["#root_sandbox", "#root_limits", "#root_budget", "#root_judgeCapabilities"]:
        assert not page.locator(hidden).first.is_visible(), hidden
    height = page.evaluate("document.documentElement.scrollHeight")
    assert height < 2000, height
    helps = page.locator(".kg-form .field-description").all_inner_texts()
    assert helps and all(len(text) <= 120 and "\n" not in text.strip() for text in helps), helps
    # An llm-judge guardrail shows its budget and a real judge-capabilities field.
    choose(page, "#root_kind", "llm-judge")
    page.locator("#root_judgeCapabilities").get_by_role("button", name="Add").first.click()
    page.wait_for_selector("#root_judgeCapabilities_model")
    page.fill("#root_judgeCapabilities_model", "judge-small")
    assert page.locator("textarea#root_judgeCapabilities").count() == 0
    page.get_by_role("tab", name="JSON").click()
    assert '"model": "judge-small"' in raw_json(page)
    assert page.script_errors == []


@pytest.mark.django_db(transaction=True)
def test_the_save_bar_never_hides_the_focused_field(page: Any, sign_in: Any, django_user_model: Any) -> None:
    arrange(django_user_model)
    sign_in("alice", PASSWORD)
    page.set_viewport_size({"width": 1024, "height": 700})
    page.goto("/guardrails/no-refunds/edit/")
    page.wait_for_selector("#root_severity")
    for field in ["#root_severity", "#root_action_on-violation", "#root_description"]:
        page.evaluate("window.scrollTo(0, 0)")
        page.focus(field)
        page.wait_for_function(
            """field => document.querySelector(field).getBoundingClientRect().bottom
                <= document.querySelector(".kg-savebar").getBoundingClientRect().top""",
            arg=field,
        )
        field_box = page.locator(field).bounding_box()
        bar_box = page.locator(".kg-savebar").bounding_box()
        assert field_box["y"] + field_box["height"] <= bar_box["y"], (field, field_box, bar_box)


@pytest.mark.django_db(transaction=True)
def test_restoring_an_old_revision_makes_a_new_one(page: Any, sign_in: Any, django_user_model: Any) -> None:
    arrange(django_user_model)
    sign_in("alice", PASSWORD)
    first = Guardrail.objects.get(guardrail_id="no-refunds").revisions.get(number=1).document
    page.on("dialog", lambda dialog: dialog.accept())
    page.goto("/guardrails/no-refunds/diff/?from=1&to=2")
    page.get_by_role("button", name="Restore revision 1").click()
    page.wait_for_url("**/guardrails/no-refunds/")
    assert "Revision 1 restored as revision 3" in page.content()
    guardrail = Guardrail.objects.get(guardrail_id="no-refunds")
    assert guardrail.revision == 3 and guardrail.document == first
    assert guardrail.revisions.count() == 3
    page.get_by_role("button", name="Restore this revision").first.click()
    page.wait_for_url("**/guardrails/no-refunds/")
    assert Guardrail.objects.get(guardrail_id="no-refunds").revision == 4
    assert page.script_errors == []


@pytest.mark.django_db(transaction=True)
def test_try_it_offers_recent_failures_first_and_searches(page: Any, sign_in: Any, django_user_model: Any) -> None:
    arrange(django_user_model)
    sign_in("alice", PASSWORD)
    page.goto("/guardrails/no-refunds/edit/")
    failed = page.locator("#kg-try-recent optgroup[label='Recently failed this check'] option")
    failed.first.wait_for(state="attached")
    assert failed.count() >= 1
    page.fill("#kg-try-search", "run-0001")
    page.wait_for_function(
        """() => {
            const labels = [...document.querySelectorAll("#kg-try-recent option")].map(o => o.textContent);
            return labels.length === 2 && labels.filter(l => l.startsWith("run-")).every(l => l.startsWith("run-0001"));
        }"""
    )
    labels = page.locator("#kg-try-recent option").all_inner_texts()
    assert [label for label in labels if label.startswith("run-")] == [
        label for label in labels if label.startswith("run-0001")
    ] and len(labels) == 2, labels
    page.select_option("#kg-try-recent", "run-0001")
    page.wait_for_function("() => document.querySelector('#kg-try-trace').value.includes('run-0001')")
    assert page.script_errors == []


@pytest.mark.django_db(transaction=True)
def test_a_save_after_another_authors_save_shows_their_change_and_keeps_mine(
    page: Any, sign_in: Any, django_user_model: Any, browser: Any, live_server: Any
) -> None:
    arrange(django_user_model)
    sign_in("alice", PASSWORD)
    page.goto("/guardrails/no-refunds/edit/")
    page.wait_for_selector("#root_name")
    # carol opens the same revision in her own browser and saves first
    other = browser.new_context(base_url=live_server.url, viewport={"width": 1440, "height": 900})
    try:
        carol = other.new_page()
        carol.set_default_timeout(15_000)
        carol.goto("/login/")
        carol.get_by_label("Username").fill("carol")
        carol.get_by_label("Password").fill(PASSWORD)
        carol.get_by_role("button", name="Sign in").click()
        carol.wait_for_url(lambda url: "/login/" not in url)
        carol.goto("/guardrails/no-refunds/edit/")
        carol.fill("#root_name", "Carol's wording")
        carol.get_by_role("button", name="Save guardrail").click()
        carol.wait_for_url("**/guardrails/no-refunds/?saved=1")
    finally:
        other.close()
    assert Guardrail.objects.get(guardrail_id="no-refunds").revision == 3

    page.fill("#root_name", "Alice's wording")
    page.get_by_role("button", name="Save guardrail").click()
    notice = page.locator(".kg-conflict")
    notice.wait_for()
    assert "Someone saved this guardrail meanwhile" in notice.inner_text()
    assert "carol saved revision 3 after you opened revision 2" in notice.inner_text()
    added = notice.locator(".diff__line--add").all_inner_texts()
    assert any("Carol's wording" in line for line in added), added
    assert page.input_value("#root_name") == "Alice's wording"
    stored = Guardrail.objects.get(guardrail_id="no-refunds")
    assert stored.revision == 3 and stored.document["name"] == "Carol's wording"
    notice.screenshot(path=str(save_screenshot(page, "editor-saved-meanwhile")))

    notice.get_by_role("button", name="Save mine over revision 3").click()
    page.wait_for_url("**/guardrails/no-refunds/?saved=1")
    stored = Guardrail.objects.get(guardrail_id="no-refunds")
    assert stored.revision == 4 and stored.document["name"] == "Alice's wording"
    assert page.script_errors == []


@pytest.mark.django_db(transaction=True)
def test_the_author_sets_where_a_guardrail_applies_at_runtime_in_the_editor(
    page: Any, sign_in: Any, django_user_model: Any
) -> None:
    arrange(django_user_model)
    sign_in("alice", PASSWORD)
    page.goto("/guardrails/no-refunds/edit/")
    runtime = page.get_by_role("group", name="At runtime")
    defaults = runtime.get_by_label("The check's stages (tool-call, output)")
    expect(defaults).to_be_checked()
    # The check's stages are shown, not chosen: their boxes wait for the author to choose.
    expect(runtime.locator("input[name=runtime-stage][value=tool-call]")).to_be_checked()
    expect(runtime.locator("input[name=runtime-stage][value=input]")).to_be_disabled()
    defaults.uncheck()
    runtime.locator("input[name=runtime-stage][value=output]").uncheck()
    runtime.locator("input[name=runtime-on-error][value=halt]").check()
    revision = Guardrail.objects.get(guardrail_id="no-refunds").revision
    page.get_by_role("button", name="Save guardrail").click()
    page.wait_for_url("**/guardrails/no-refunds/?saved=1")
    stored = Guardrail.objects.get(guardrail_id="no-refunds")
    # The document is unchanged (no new revision for console state); the state is the author's.
    assert (stored.revision, stored.stages, stored.on_error) == (revision, ["tool-call"], "halt")
    page.goto("/guardrails/no-refunds/edit/")
    runtime = page.get_by_role("group", name="At runtime")
    expect(runtime.get_by_label("The check's stages (tool-call, output)")).not_to_be_checked()
    expect(runtime.locator("input[name=runtime-stage][value=output]")).not_to_be_checked()
    expect(runtime.locator("input[name=runtime-on-error][value=halt]")).to_be_checked()
    # Back to the check's own stages.
    runtime.get_by_label("The check's stages (tool-call, output)").check()
    page.get_by_role("button", name="Save guardrail").click()
    page.wait_for_url("**/guardrails/no-refunds/?saved=1")
    assert Guardrail.objects.get(guardrail_id="no-refunds").stages is None
    assert page.script_errors == []


@pytest.mark.django_db(transaction=True)
def test_failing_closed_is_offered_only_to_a_guardrail_that_halts(
    page: Any, sign_in: Any, django_user_model: Any
) -> None:
    arrange(django_user_model)
    sign_in("alice", PASSWORD)
    page.goto("/guardrails/max-three-calls/edit/")
    runtime = page.get_by_role("group", name="At runtime")
    expect(runtime.locator("input[name=runtime-on-error][value=halt]")).to_be_disabled()
    expect(runtime.locator("input[name=runtime-on-error][value=pass]")).to_be_checked()
    # Choosing no stage at all is refused before anything is saved.
    runtime.get_by_label("The check's stages (tool-call, output)").uncheck()
    for stage in ("tool-call", "output"):
        runtime.locator(f"input[name=runtime-stage][value={stage}]").uncheck()
    expect(runtime.get_by_role("alert")).to_contain_text("Choose at least one stage")
    revision = Guardrail.objects.get(guardrail_id="max-three-calls").revision
    page.get_by_role("button", name="Save guardrail").click()
    expect(page.locator(".kg-savebar__message")).to_contain_text("Not saved: choose at least one stage")
    stored = Guardrail.objects.get(guardrail_id="max-three-calls")
    assert (stored.revision, stored.stages) == (revision, None)
    assert page.script_errors == []
