"""Preview impact: a draft beside its current revision over stored traces, read like a run;
nothing stored as results or violations; judge spend in the ledger as the preview's."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest

from tests.conftest import make_guardrail, make_trace, signed_in
from tests.traces.test_evaluations import store_traces
from tests.traces.test_judge_ledger import judge_document, judge_guardrail, local_judge  # noqa: F401
from traces.models import EvaluationResult, GuardrailPreview, JudgeLedgerEntry, Violation

URL = "/api/v1/guardrails/preview"
STRICTER = make_guardrail(config={"tools": ["issue_refund", "lookup_order"]})


@pytest.fixture
def start(api: Any, django_capture_on_commit_callbacks: Any) -> Any:
    def post(who: Any, body: dict[str, Any]) -> Any:
        with django_capture_on_commit_callbacks(execute=True):
            return api(who).post(URL, body, format="json")

    return post


def test_a_stricter_draft_newly_fails_traces_and_stores_nothing(
    start: Any, api: Any, alice: Any, acme: Any, halt_guardrail: Any
) -> None:
    store_traces(acme, 9)
    results, violations = EvaluationResult.objects.count(), Violation.objects.count()
    answer = start(alice, {"tenant": "acme", "guardrail": STRICTER})
    assert answer.status_code == 202, answer.json()
    body = api(alice).get(answer.json()["url"]).json()
    assert body["status"] == "succeeded" and body["progress"] == {"done": 9, "total": 9, "percent": 100}
    assert body["counts"] == {"newlyFailing": 6, "noLongerFailing": 0, "unchanged": 3}
    assert body["currentRevision"] == 1 and len(body["newlyFailing"]) == 6
    assert body["newlyFailing"][0]["traceUrl"].startswith("/traces/")
    assert body["traces"]["since"]  # the last week by default
    assert (EvaluationResult.objects.count(), Violation.objects.count()) == (results, violations)
    back = start(alice, {"tenant": "acme", "guardrail": make_guardrail(config={"tools": ["nothing"]})}).json()
    assert api(alice).get(back["url"]).json()["counts"]["noLongerFailing"] == 3


def test_a_reviewer_previews_and_another_tenant_gets_nothing(
    start: Any, api: Any, bob: Any, charlie: Any, charlie_key: str, acme: Any, halt_guardrail: Any
) -> None:
    store_traces(acme, 3)
    answer = start(bob, {"tenant": "acme", "guardrail": STRICTER})
    assert answer.status_code == 202
    url = answer.json()["url"]
    for outsider in (api(charlie), api(charlie_key)):
        assert outsider.get(url).status_code == 404
    assert start(charlie, {"tenant": "acme", "guardrail": STRICTER}).status_code in (403, 404)
    assert start(charlie_key, {"tenant": "acme", "guardrail": STRICTER}).status_code in (403, 404)
    assert GuardrailPreview.objects.count() == 1
    assert signed_in(charlie).get(answer.json()["page"]).status_code == 404


@pytest.mark.parametrize(
    ("body", "pointer"),
    [
        ({"guardrail": {"id": "x"}}, "/guardrail"),
        ({"guardrail": STRICTER, "traces": {"colour": "red"}}, "/traces/colour"),
        ({"guardrail": STRICTER, "traces": {"since": "yesterday"}}, "/traces/since"),
        ({"guardrail": STRICTER, "mode": "later"}, "/mode"),
        ({"guardrail": STRICTER, "extra": 1}, "/extra"),
    ],
)
def test_a_bad_preview_is_a_400_naming_the_field(
    start: Any, alice: Any, acme: Any, halt_guardrail: Any, body: dict[str, Any], pointer: str
) -> None:
    answer = start(alice, {"tenant": "acme", **body})
    assert answer.status_code == 400
    assert answer.json()["errors"][0]["path"].startswith(pointer)
    assert not GuardrailPreview.objects.exists()


def test_a_judge_drafts_spend_is_the_previews_in_the_ledger(
    start: Any, api: Any, alice: Any, acme: Any, acme_key: str, local_judge: Any, judge_guardrail: Any
) -> None:
    api(acme_key).post(
        "/api/v1/traces", data={"traces": [make_trace(f"j-{n}", toolCalls=[]) for n in range(2)]}, format="json"
    )
    before = JudgeLedgerEntry.objects.count()
    draft = judge_document(config={"criteria": "The agent never promises anything at all."})
    answer = start(alice, {"tenant": "acme", "guardrail": draft})
    preview = GuardrailPreview.objects.get(pk=answer.json()["id"])
    assert preview.status == "succeeded", preview.error
    assert preview.judge_estimate_usd is not None
    spent = JudgeLedgerEntry.objects.filter(preview=preview)
    assert spent.exists() and JudgeLedgerEntry.objects.count() > before
    assert preview.judge_cost_usd == sum((e.cost_usd for e in spent), Decimal(0))


def test_the_pages_start_a_preview_from_a_draft_and_show_what_changed(
    alice: Any, acme: Any, halt_guardrail: Any, django_capture_on_commit_callbacks: Any
) -> None:
    import json

    store_traces(acme, 6)
    client = signed_in(alice)
    form = client.get("/guardrails/previews/new/?guardrail=no-refunds").content.decode()
    assert "issue_refund" in form and "Preview impact" in form
    from_editor = client.post("/guardrails/previews/new/", {"draft": json.dumps(STRICTER)}).content.decode()
    assert "lookup_order" in from_editor  # the editor's draft fills the form, nothing starts
    assert not GuardrailPreview.objects.exists()
    with django_capture_on_commit_callbacks(execute=True):
        answer = client.post("/guardrails/previews/new/", {"draft": json.dumps(STRICTER), "start": "1", "mode": "ci"})
    assert answer.status_code == 302
    html = client.get(answer["Location"]).content.decode()
    assert "data-newly-failing>4<" in html and "run-00001" in html
    bad = client.post("/guardrails/previews/new/", {"draft": "{nope", "start": "1"}).content.decode()
    assert "/guardrail: not JSON" in bad


def test_a_retried_preview_with_its_idempotency_key_starts_one(
    api: Any, alice: Any, acme: Any, halt_guardrail: Any
) -> None:
    store_traces(acme, 3)
    body = {"tenant": "acme", "guardrail": STRICTER}
    first = api(alice).post(URL, body, format="json", HTTP_IDEMPOTENCY_KEY="preview-1")
    again = api(alice).post(URL, body, format="json", HTTP_IDEMPOTENCY_KEY="preview-1")
    assert first.status_code == again.status_code == 202, first.json()
    assert again.json()["id"] == first.json()["id"] and again["Idempotent-Replayed"] == "true"
    assert GuardrailPreview.objects.count() == 1
