"""An author finishes in the form alone: every kind the form offers and a check of every
built-in family (the llm-judge rubric included) is written from scratch in the form, without
the JSON tab, and saved valid; the stored document holds no optional object nobody filled
(the form used to fill in `"action": {"retry": {}}`, `"limits": {}`, `"needsSpec": {...}`,
which made the document invalid inside folded sections)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from playwright.sync_api import expect

from guardrails.deployment import listed_checks
from guardrails.models import Guardrail
from tests.browser.test_authoring import PASSWORD, arrange, choose, raw_json


def add_items(page: Any, field: str, values: list[str]) -> None:
    for index, value in enumerate(values):
        page.locator(f"#{field}").get_by_role("button", name="Add").first.click()
        page.fill(f"#{field}_{index}", value)


#: How an author fills in each built-in check's settings, by check id.
FILL: dict[str, Callable[[Any], None]] = {
    "must-cite": lambda page: None,
    "never-call-tool": lambda page: add_items(page, "root_config_tools", ["issue_refund"]),
    "max-tool-calls": lambda page: page.fill("#root_config_max", "3"),
    "output-matches": lambda page: page.fill("#root_config_pattern", "^Thanks"),
    "tool-order": lambda page: add_items(page, "root_config_order", ["lookup_order", "issue_refund"]),
    "required-substring": lambda page: add_items(page, "root_config_values", ["policy"]),
    "forbidden-substring": lambda page: add_items(page, "root_config_values", ["social security number"]),
    "rubric": lambda page: page.fill("#root_config_criteria", "The reply never promises a refund."),
}

#: The actions the cases take in turn: the five of the contract and a custom one.
ACTIONS = ["halt", "log-only", "retry", "escalate", "compensate", "page-the-oncall"]


def empty_objects(value: Any, path: str = "") -> list[str]:
    """The JSON pointers of the empty objects and arrays of a document."""
    if isinstance(value, dict):
        found = [path or "/"] if not value else []
        for key, item in value.items():
            found += empty_objects(item, f"{path}/{key}")
        return found
    if isinstance(value, list):
        return [path] if not value else [p for i, item in enumerate(value) for p in empty_objects(item, f"{path}/{i}")]
    return []


def choose_action(page: Any, action: str) -> None:
    select = page.locator("#root_action_on-violation")
    if action in ACTIONS[:5]:
        select.select_option(action)
    else:
        select.select_option(label="Another action…")
        page.fill("#root_action_on-violation__custom", action)


def write_in_the_form(page: Any, kind: str, check: str, action: str) -> dict[str, Any]:
    page.goto("/guardrails/new/")
    page.wait_for_selector("#root_id")
    guardrail_id = f"form-{check}"
    page.fill("#root_id", guardrail_id)
    page.fill("#root_name", f"Written in the form: {check}")
    choose(page, "#root_kind", kind)
    choose(page, "#root_check", check)
    FILL[check](page)
    choose_action(page, action)
    choose(page, "#root_severity", "error")
    expect(page.locator(".kg-editor .pill--pass")).to_have_text("Valid on the server", timeout=10_000)
    document = page.evaluate("() => JSON.parse(document.querySelector('input[name=draft]').value)")
    assert empty_objects(document) == [], document
    page.get_by_role("button", name="Save guardrail").click()
    page.wait_for_url(f"**/guardrails/{guardrail_id}/?saved=1")
    stored: dict[str, Any] = Guardrail.objects.get(guardrail_id=guardrail_id).document
    return stored


@pytest.mark.django_db(transaction=True)
def test_every_kind_and_built_in_check_is_written_in_the_form_alone(
    page: Any, sign_in: Any, django_user_model: Any
) -> None:
    arrange(django_user_model)
    sign_in("alice", PASSWORD)
    page.goto("/guardrails/new/")
    page.wait_for_selector("#root_kind")
    offered = [kind for kind in page.locator("select#root_kind option").all_inner_texts() if kind.strip()]
    checks = [check for check in listed_checks() if check.builtin]
    # Every kind the form offers has a built-in check written below, llm-judge included.
    assert {"zero-llm", "llm-judge"} <= set(offered), offered
    assert {check.kind for check in checks} == set(offered), (offered, [c.id for c in checks])
    assert {check.id for check in checks} == set(FILL), sorted(check.id for check in checks)
    for index, check in enumerate(checks):
        action = ACTIONS[index % len(ACTIONS)]
        stored = write_in_the_form(page, check.kind, check.id, action)
        assert empty_objects(stored) == [], (check.id, stored)
        assert (stored["kind"], stored["check"], stored["action"]) == (check.kind, check.id, {"on-violation": action})
        for unused in ("scope", "budget", "limits", "needsSpec", "judgeCapabilities", "network", "sandbox"):
            assert unused not in stored, (check.id, unused, stored)
    rubric = Guardrail.objects.get(guardrail_id="form-rubric").document
    assert rubric["config"]["criteria"] == "The reply never promises a refund."
    assert page.script_errors == []


@pytest.mark.django_db(transaction=True)
def test_a_section_opened_and_left_empty_or_removed_stays_out_of_the_document(
    page: Any, sign_in: Any, django_user_model: Any
) -> None:
    arrange(django_user_model)
    sign_in("alice", PASSWORD)
    page.goto("/guardrails/new/")
    page.wait_for_selector("#root_id")
    page.fill("#root_id", "judged-politeness")
    choose(page, "#root_kind", "llm-judge")
    choose(page, "#root_check", "rubric")
    page.fill("#root_config_criteria", "Polite.")
    # Budget opened and left empty: open on screen, absent from the document.
    page.locator("#root_budget").get_by_role("button", name="Add").first.click()
    page.wait_for_selector("#root_budget_maxCostUsd")
    page.fill("#root_name", "Polite replies")
    expect(page.locator("#root_budget_maxCostUsd")).to_be_visible()
    # Scope opened, filled, emptied, then removed: it closes and stays closed.
    page.locator("#root_scope").get_by_role("button", name="Add").first.click()
    page.wait_for_selector("#root_scope_when")
    page.locator("#root_scope_when").select_option(label="ci-only")
    page.locator("#root_scope").get_by_role("button", name="Remove").first.click()
    expect(page.locator("#root_scope_when")).to_have_count(0)
    expect(page.locator("#root_scope").get_by_role("button", name="Add")).to_have_count(1)
    expect(page.locator(".kg-editor .pill--pass")).to_have_text("Valid on the server", timeout=10_000)
    page.get_by_role("tab", name="JSON").click()
    text = raw_json(page)
    assert '"budget"' not in text and '"scope"' not in text and "{}" not in text, text
    page.get_by_role("tab", name="Form").click()
    page.get_by_role("button", name="Save guardrail").click()
    page.wait_for_url("**/guardrails/judged-politeness/?saved=1")
    stored = Guardrail.objects.get(guardrail_id="judged-politeness").document
    assert empty_objects(stored) == [] and "budget" not in stored and "scope" not in stored, stored
    assert page.script_errors == []


@pytest.mark.django_db(transaction=True)
def test_on_violation_is_a_choice_of_the_five_actions_or_a_custom_one(
    page: Any, sign_in: Any, django_user_model: Any
) -> None:
    arrange(django_user_model)
    sign_in("alice", PASSWORD)
    page.goto("/guardrails/max-three-calls/edit/")
    select = page.locator("#root_action_on-violation")
    select.wait_for()
    options = select.locator("option").all_inner_texts()
    assert options == ["Choose…", "halt", "log-only", "retry", "escalate", "compensate", "Another action…"], options
    expect(select).to_have_value("log-only")
    select.select_option(label="Another action…")
    page.fill("#root_action_on-violation__custom", "notify-billing")
    page.get_by_role("button", name="Save guardrail").click()
    page.wait_for_url("**/guardrails/max-three-calls/?saved=1")
    stored = Guardrail.objects.get(guardrail_id="max-three-calls").document
    assert stored["action"] == {"on-violation": "notify-billing"}, stored
    # A custom action opens as one: the box shows it.
    page.goto("/guardrails/max-three-calls/edit/")
    expect(page.locator("#root_action_on-violation__custom")).to_have_value("notify-billing")
    assert page.script_errors == []
