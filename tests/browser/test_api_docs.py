"""/api/docs/ renders the API's description with no Content-Security-Policy violation."""

from __future__ import annotations

from typing import Any

import pytest


@pytest.mark.django_db(transaction=True)
def test_the_api_docs_page_keeps_to_the_content_security_policy(page: Any) -> None:
    messages: list[str] = []
    page.on("console", lambda message: messages.append(message.text))
    page.goto("/api/docs/")
    page.wait_for_selector(".opblock-tag")  # the operations are rendered
    page.locator(".opblock-summary").first.click()  # an operation opens (React styles)
    page.wait_for_selector(".opblock-body")
    violations = [m for m in messages if "Content Security Policy" in m or "Content-Security" in m]
    assert violations == []
    assert page.script_errors == []
