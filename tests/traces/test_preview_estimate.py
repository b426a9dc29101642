"""What a draft is about to run, in judge calls and dollars, before Try it or Preview impact;
and a preview whose judge cannot be reached ends, failed, with a clear error."""

from __future__ import annotations

import json
import socket
from typing import Any

import pytest
from django.db import connection

from guardrails.services import Author, save_guardrail
from tests.conftest import make_guardrail, make_trace, signed_in
from tests.traces.test_judge_ledger import judge_document, local_judge  # noqa: F401 (fixtures)
from traces.judge.registry import save_registration
from traces.models import GuardrailPreview
from traces.runs import previews

URL = "/api/v1/guardrails/preview/estimate"


def store(api: Any, key: str, count: int) -> None:
    traces = [make_trace(f"e-{n}", tenant="acme", toolCalls=[]) for n in range(count)]
    assert api(key).post("/api/v1/traces", data={"traces": traces}, format="json").status_code in (200, 201, 207)


def unreachable_judge() -> None:
    """A judge model registered at a local port where nothing listens (the demo's old one)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    save_registration(
        {
            "id": "nowhere",
            "provider": "openai",
            "model": "m",
            "baseUrl": f"http://127.0.0.1:{port}/v1",
            "pricing": {"inputUsdPerMTok": "1", "outputUsdPerMTok": "1"},
            "capabilities": ["json"],
        }
    )


def test_a_judge_drafts_estimate_counts_its_calls_and_dollars(
    api: Any, alice: Any, acme: Any, acme_key: str, local_judge: Any
) -> None:
    store(api, acme_key, 3)
    answer = api(alice).post(URL, {"guardrail": judge_document(), "tenant": "acme"}, format="json")
    assert answer.status_code == 200, answer.json()
    body = answer.json()
    assert (body["tenant"], body["preview"]["calls"], body["preview"]["traces"]) == ("acme", 3, 3)
    assert body["try"]["calls"] == 1 and float(body["try"]["costUsd"]) > 0
    assert float(body["preview"]["costUsd"]) == pytest.approx(3 * float(body["try"]["costUsd"]), rel=0.2)
    zero = api(alice).post(URL, {"guardrail": make_guardrail(), "tenant": "acme"}, format="json").json()
    assert (zero["preview"]["calls"], zero["try"]["costUsd"]) == (0, "0")


def test_a_bad_estimate_request_names_the_field_and_another_tenant_gets_nothing(
    api: Any, alice: Any, acme: Any, charlie: Any, acme_key: str, local_judge: Any
) -> None:
    bad = api(alice).post(URL, {"guardrail": {**judge_document(), "kind": 3}, "tenant": "acme"}, format="json")
    assert bad.status_code == 400 and bad.json()["errors"][0]["path"].startswith("/guardrail/kind")
    mode = api(alice).post(URL, {"guardrail": judge_document(), "tenant": "acme", "mode": "x"}, format="json")
    assert mode.status_code == 400 and mode.json()["errors"][0]["path"] == "/mode"
    assert api(charlie).post(URL, {"guardrail": judge_document(), "tenant": "acme"}, format="json").status_code == 404
    assert api(None).post(URL, {"guardrail": judge_document()}, format="json").status_code in (401, 403)


def test_the_preview_form_shows_the_estimate_of_the_draft(
    api: Any, alice: Any, acme: Any, acme_key: str, local_judge: Any
) -> None:
    store(api, acme_key, 2)
    client = signed_in(alice)
    page = client.post("/guardrails/previews/new/", {"draft": json.dumps(judge_document())})
    html = page.content.decode()
    assert page.status_code == 200 and "Judge cost estimate" in html
    assert '<dt class="stat__label">Judge calls</dt><dd class="stat__value">2</dd>' in html


@pytest.mark.django_db(transaction=True)
def test_a_preview_whose_judge_cannot_be_reached_fails_with_a_clear_error(
    api: Any, alice: Any, acme: Any, acme_key: str, django_capture_on_commit_callbacks: Any
) -> None:
    unreachable_judge()
    save_guardrail(judge_document(), Author(user=None, label="t"), owner=acme)
    store(api, acme_key, 8)
    answer = api(alice).post(
        "/api/v1/guardrails/preview", {"guardrail": judge_document(), "tenant": "acme"}, format="json"
    )
    assert answer.status_code == 202, answer.json()
    preview = GuardrailPreview.objects.get(pk=answer.json()["id"])
    assert preview.status == "failed", (preview.status, preview.done, connection.vendor)
    assert preview.error.startswith("the judge could not be reached (")
    assert f"for {previews.UNREACHABLE_IN_A_ROW} traces in a row" in preview.error
    assert preview.done == previews.UNREACHABLE_IN_A_ROW < preview.total == 8
