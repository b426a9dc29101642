"""Authoring a guardrail in a real browser through the form generated from the schemas.

Also saves screenshots of the guardrail list, detail, editor and diff, the overview and the
admin pages (test-artifacts/screenshots/).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from rest_framework.test import APIClient

from guardrails.models import Guardrail
from guardrails.services import Author, save_guardrail
from kindgi_console.tenancy.models import ApiKey, Membership, Tenant
from tests.browser.conftest import screenshot as save_screenshot
from tests.conftest import make_guardrail, make_trace

PASSWORD = "correct horse 42"


def raw_json(page: Any) -> str:
    """The text of the JSON view's code editor (every line is drawn: the documents are short)."""
    return page.locator("#guardrail-raw-json .cm-content").inner_text()


def arrange(django_user_model: Any) -> None:
    """acme with alice (author, admin), guardrails with history, a few violations."""
    acme = Tenant.objects.create(slug="acme", name="Acme")
    globex = Tenant.objects.create(slug="globex", name="Globex")
    alice = django_user_model.objects.create_user("alice", "alice@example.org", PASSWORD)
    Membership.objects.create(user=alice, tenant=acme, role="admin")
    for name, tenant, role in [("bob", acme, "reviewer"), ("carol", acme, "author"), ("charlie", globex, "admin")]:
        user = django_user_model.objects.create_user(name, f"{name}@example.org", PASSWORD)
        Membership.objects.create(user=user, tenant=tenant, role=role)
    fixture = Author(user=alice, label="alice")
    save_guardrail(make_guardrail(severity="warn", description="Refunds need a human."), fixture, owner=acme)
    save_guardrail(
        make_guardrail(
            description="Refunds need a human in the loop.", scope={"when": "always", "agents": ["support-bot"]}
        ),
        fixture,
        owner=acme,
    )
    save_guardrail(
        make_guardrail(
            "max-three-calls",
            name="At most three tool calls",
            check="max-tool-calls",
            config={"max": 3},
            severity="warn",
            action={"on-violation": "log-only"},
        ),
        fixture,
        owner=acme,
    )
    save_guardrail(
        make_guardrail(
            "cite-sources",
            name="Cite the policy",
            check="must-cite",
            config={},
            severity="error",
            action={"on-violation": "log-only"},
        ),
        fixture,
        enabled=False,
        owner=acme,
    )
    ApiKey.issue(scopes=["ingest", "evaluate", "read"], tenant=acme, name="support-bot production", created_by=alice)
    key = ApiKey.issue(scopes=["ingest", "evaluate", "read"], tenant=acme, name="runtime")[1]
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {key}")
    for n in range(4):
        trace = make_trace(f"run-{n:04}", agent="support-bot" if n % 2 else "billing-bot")
        assert client.post("/api/v1/evaluate", trace, format="json").status_code == 200


def screenshot(page: Any, name: str) -> None:
    """A full-page screenshot from the top, so that the sticky bars sit where they belong."""
    page.evaluate("window.scrollTo(0, 0)")
    save_screenshot(page, name)


def choose(page: Any, selector: str, text: str) -> None:
    """Pick the option whose label starts with `text` (rjsf's option values are indexes)."""
    labels = page.locator(f"{selector} option").all_inner_texts()
    page.select_option(selector, label=next(label for label in labels if label.startswith(text)))


def wait_for_server_check(page: Any) -> None:
    page.wait_for_selector(".kg-editor .pill--pass, .kg-editor .pill--fail", timeout=10_000)


@pytest.mark.django_db(transaction=True)
def test_an_author_writes_a_guardrail_with_the_generated_form(page: Any, sign_in: Any, django_user_model: Any) -> None:
    arrange(django_user_model)
    sign_in("alice", PASSWORD)
    page.goto("/guardrails/new/")
    page.wait_for_selector("#root_id")

    page.fill("#root_id", "no-refunds")  # already taken: the server will say so at save
    page.fill("#root_name", "Never promise an SSN")
    choose(page, "#root_check", "forbidden-substring")
    # The config sub-form is the chosen check's config schema: its `values` list appears.
    page.wait_for_selector("#root_config_values__title, #root_config_values", state="attached")
    page.locator("#root_config_values").get_by_role("button", name="Add").first.click()
    page.wait_for_selector("#root_config_values_0")
    # A client-side error as one types: an empty value breaks minLength 1, shown at its field.
    page.fill("#root_config_values_0", "x")
    page.fill("#root_config_values_0", "")
    client_error = page.locator("#root_config_values_0__error")
    client_error.wait_for()
    assert client_error.inner_text().strip()
    page.fill("#root_config_values_0", "social security number")
    page.wait_for_selector("#root_config_values_0__error", state="detached")
    choose(page, "#root_severity", "error")
    wait_for_server_check(page)
    screenshot(page, "guardrail-editor")

    # The raw-JSON view is the same document.
    page.get_by_role("tab", name="JSON").click()
    raw = json.loads(raw_json(page))
    assert raw["check"] == "forbidden-substring"
    assert raw["config"] == {"values": ["social security number"]}
    page.get_by_role("tab", name="Form").click()

    # Try it before saving, against a pasted trace.
    page.fill("#kg-try-trace", json.dumps(make_trace("pasted", output="Your social security number is on file.")))
    page.get_by_role("button", name="Run against this trace").click()
    page.wait_for_selector(".kg-try-result .pill--fail")

    # A server-side error (the id is taken) lands on the id field.
    page.get_by_role("button", name="Save guardrail").click()
    server_error = page.locator("#root_id__error")
    server_error.wait_for()
    assert "already exists" in server_error.inner_text()
    page.fill("#root_id", "no-ssn-promises")
    page.get_by_role("button", name="Save guardrail").click()
    page.wait_for_url("**/guardrails/no-ssn-promises/?saved=1")
    assert "Saved: no-ssn-promises is now at revision 1" in page.locator("#saved-note").inner_text()
    assert Guardrail.objects.get(guardrail_id="no-ssn-promises").document["config"] == {
        "values": ["social security number"]
    }
    screenshot(page, "guardrail-detail-new")

    # Find it in the list, then export it.
    page.goto("/guardrails/?q=ssn")
    page.get_by_role("link", name="no-ssn-promises").click()
    page.wait_for_url("**/guardrails/no-ssn-promises/")
    with page.expect_download() as download_info:
        page.get_by_role("link", name="Export JSON").click()
    exported = json.loads(Path(download_info.value.path()).read_text())
    assert exported["id"] == "no-ssn-promises" and exported["check"] == "forbidden-substring"
    assert page.script_errors == []


@pytest.mark.django_db(transaction=True)
def test_the_editor_replaces_the_config_form_when_the_check_changes(
    page: Any, sign_in: Any, django_user_model: Any
) -> None:
    arrange(django_user_model)
    sign_in("alice", PASSWORD)
    page.goto("/guardrails/max-three-calls/edit/")
    page.wait_for_selector("#root_config_max")
    assert page.input_value("#root_config_max") == "3"
    choose(page, "#root_check", "never-call-tool")
    page.wait_for_selector("#root_config_max", state="detached")
    page.wait_for_selector("#root_config_tools", state="attached")
    assert page.locator("#root_severity option").count() >= 4
    # `network` is a choice of variant: adding it offers its shapes, and the allowlist has hosts.
    page.locator("details.kg-advanced > summary").click()  # network is not used by this check
    page.locator("#root_network").get_by_role("button", name="Add").first.click()
    variant = page.locator("select[id^='root_network'][id$='oneof_select']")
    variant.wait_for()
    labels = variant.locator("option").all_inner_texts()
    assert "Allowlist" in labels, labels
    variant.select_option(label="Allowlist")
    page.wait_for_selector("#root_network_hosts", state="attached")
    page.locator("#root_network_hosts").get_by_role("button", name="Add").first.click()
    page.fill("#root_network_hosts_0", "api.example.org")
    page.get_by_role("tab", name="JSON").click()
    raw = json.loads(raw_json(page))
    assert raw["network"] == {"kind": "allowlist", "hosts": ["api.example.org"]}
    assert "max" not in raw.get("config", {})
    page.get_by_role("tab", name="Form").click()
    screenshot(page, "guardrail-editor-variants")
    assert page.script_errors == []


@pytest.mark.django_db(transaction=True)
def test_screenshots_of_the_guardrail_and_admin_pages(page: Any, sign_in: Any, django_user_model: Any) -> None:
    arrange(django_user_model)
    sign_in("alice", PASSWORD)
    for url, name, marker in [
        ("/", "overview", "Open violations"),
        ("/guardrails/", "guardrail-list", "no-refunds"),
        ("/guardrails/no-refunds/", "guardrail-detail", "Pass rate"),
        ("/guardrails/no-refunds/diff/?from=1&to=2", "guardrail-diff", "Revision 1"),
        ("/guardrails/import/", "guardrail-import", "Import guardrails"),
        ("/manage/tenants/", "admin-tenants", "Tenants"),
        ("/manage/members/", "admin-members", "Members of"),
        ("/manage/api-keys/", "admin-api-keys", "API keys"),
    ]:
        page.goto(url)
        assert marker in page.content(), url
        screenshot(page, name)
    page.goto("/guardrails/no-refunds/")
    page.wait_for_selector("canvas[data-chart-ready='true']")
    screenshot(page, "guardrail-detail")
    page.goto("/manage/api-keys/")
    page.fill("#key-name", "ci publisher")
    page.get_by_role("button", name="Create key").click()
    secret = page.locator("#new-api-key").inner_text()
    assert secret.startswith("kgi_")
    screenshot(page, "admin-api-key-created")
    page.reload()  # posts the form again: its spent token makes no second key and shows no secret
    assert secret not in page.content()
    assert ApiKey.objects.filter(name="ci publisher").count() == 1
    assert page.script_errors == []
