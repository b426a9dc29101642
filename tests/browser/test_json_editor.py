"""The editor's JSON view is a code editor (CodeMirror 6) that runs under the console's real
Content-Security-Policy: parse and schema errors are marked on their lines, a valid edit
shows in the form, no style or script is refused, and axe-core finds nothing serious."""

from __future__ import annotations

import json
from typing import Any

import pytest
from playwright.sync_api import Browser

from tests.browser.test_authoring import PASSWORD, arrange, raw_json
from tests.browser.test_every_page import AXE, AXE_JS


def open_json_view(page: Any, sign_in: Any, django_user_model: Any) -> list[str]:
    """Sign in, open a new guardrail's JSON view; the console messages are collected."""
    messages: list[str] = []
    page.on("console", lambda message: messages.append(f"{message.type}: {message.text}"))
    arrange(django_user_model)
    sign_in("alice", PASSWORD)
    page.goto("/guardrails/new/")
    page.wait_for_selector("#root_id")
    page.fill("#root_id", "json-view")
    page.fill("#root_name", "JSON view")
    page.get_by_role("tab", name="JSON").click()
    page.wait_for_selector("#guardrail-raw-json .cm-content")
    return messages


def replace_text(page: Any, text: str) -> None:
    page.locator("#guardrail-raw-json .cm-content").click()
    page.keyboard.press("Control+a")
    page.keyboard.press("Delete")
    page.keyboard.insert_text(text)


def marked_lines(page: Any) -> list[str]:
    """The text of each line that holds an error mark."""
    page.wait_for_selector("#guardrail-raw-json .cm-lintRange-error")
    return (
        page.locator("#guardrail-raw-json .cm-line").filter(has=page.locator(".cm-lintRange-error")).all_inner_texts()
    )


def refused(messages: list[str]) -> list[str]:
    return [m for m in messages if "Content Security Policy" in m or "Refused to" in m]


@pytest.mark.django_db(transaction=True)
def test_the_json_view_marks_errors_on_their_lines_and_edits_reach_the_form(
    page: Any, sign_in: Any, django_user_model: Any
) -> None:
    messages = open_json_view(page, sign_in, django_user_model)
    # Highlighting and folding: property names are styled, objects fold from the gutter.
    assert page.locator("#guardrail-raw-json .cm-foldGutter").count() == 1
    assert page.locator("#guardrail-raw-json .cm-line span[class]").count() > 0
    document = json.loads(raw_json(page))
    assert document["id"] == "json-view"

    # A parse error is marked on the line that holds it.
    broken = json.dumps(document, indent=2).replace('"name": "JSON view"', '"name": "JSON view" oops')
    replace_text(page, broken)
    lines = marked_lines(page)
    assert len(lines) == 1 and "oops" in lines[0], lines
    assert page.locator("#guardrail-raw-json-status").inner_text().strip()

    # A schema error (an unknown severity) is marked on the severity's line.
    document["severity"] = "apocalyptic"
    replace_text(page, json.dumps(document, indent=2))
    page.wait_for_function(
        "() => [...document.querySelectorAll('#guardrail-raw-json .cm-line')].some("
        "(l) => l.querySelector('.cm-lintRange-error') && l.textContent.includes('apocalyptic'))"
    )
    assert all("apocalyptic" in line or "severity" in line for line in marked_lines(page)), marked_lines(page)

    # A valid edit shows in the form, and the form's edit shows back in the JSON.
    document["severity"] = "warn"
    document["name"] = "Edited as JSON"
    replace_text(page, json.dumps(document, indent=2))
    page.wait_for_selector("#guardrail-raw-json .cm-lintRange-error", state="detached")
    page.get_by_role("tab", name="Form").click()
    assert page.locator("#root_name").input_value() == "Edited as JSON"
    page.fill("#root_name", "Edited in the form")
    page.get_by_role("tab", name="JSON").click()
    assert json.loads(raw_json(page))["name"] == "Edited in the form"

    assert refused(messages) == [], messages
    assert page.script_errors == []


@pytest.mark.django_db(transaction=True)
def test_the_page_sends_a_style_nonce_that_the_editor_uses(page: Any, sign_in: Any, django_user_model: Any) -> None:
    messages = open_json_view(page, sign_in, django_user_model)
    nonce = page.locator("#guardrail-editor").get_attribute("data-csp-nonce")
    assert nonce
    styles = page.eval_on_selector_all("style", "(nodes) => nodes.map((n) => n.nonce)")
    assert styles and all(value == nonce for value in styles), styles
    assert refused(messages) == [], messages


@pytest.mark.django_db(transaction=True)
def test_the_json_view_passes_axe(browser: Browser, live_server: Any, django_user_model: Any) -> None:
    arrange(django_user_model)
    # bypass_csp only lets the test inject axe-core; the other tests run under the real CSP.
    context = browser.new_context(base_url=live_server.url, viewport={"width": 1440, "height": 900}, bypass_csp=True)
    page = context.new_page()
    try:
        page.goto("/login/")
        page.get_by_label("Username").fill("alice")
        page.get_by_label("Password").fill(PASSWORD)
        page.get_by_role("button", name="Sign in").click()
        page.wait_for_url(lambda url: "/login/" not in url)
        page.goto("/guardrails/new/")
        page.wait_for_selector("#root_id")
        page.get_by_role("tab", name="JSON").click()
        page.wait_for_selector("#guardrail-raw-json .cm-content")
        page.add_script_tag(path=str(AXE))
        assert page.evaluate(AXE_JS) == []
    finally:
        context.close()
