"""A guardrail's fail mode: on `error`, the turn goes on (pass, the default) or fails closed
(halt, for halt guardrails only), set in the API and on the guardrail's page."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import User
from django.test import Client

from guardrails.services import Author, save_guardrail
from kindgi_console.tenancy.models import Tenant
from tests.conftest import make_trace

from .test_judge_ledger import judge_document

URL = "/api/v1/guardrails/no-refund-promises/fail-mode"


def halting_judge(acme: Tenant) -> Any:
    """An acme llm-judge guardrail that halts; no judge model is registered: it errs."""
    document = judge_document(action={"on-violation": "halt"})
    return save_guardrail(document, Author(user=None, label="fixture"), owner=acme)


def evaluate(api: Any, key: str) -> dict[str, Any]:
    response = api(key).post("/api/v1/evaluate", data=make_trace("t-1"), format="json")
    assert response.status_code == 200, response.json()
    return dict(response.json())


def test_an_erring_guardrail_lets_the_turn_go_on_by_default(api: Any, acme: Tenant, acme_key: str) -> None:
    halting_judge(acme)
    answer = evaluate(api, acme_key)
    assert answer["turn"] == "completed"
    assert "error" not in answer
    assert api(acme_key).get(URL).json() == {"guardrail": "no-refund-promises", "onError": "pass"}


def test_a_guardrail_that_fails_closed_halts_the_turn_naming_itself_and_its_error(
    api: Any, acme: Tenant, acme_key: str, alice: User
) -> None:
    halting_judge(acme)
    response = api(alice).put(URL, data={"onError": "halt"}, format="json")
    assert response.status_code == 200, response.json()
    assert response.json()["onError"] == "halt"

    answer = evaluate(api, acme_key)
    assert answer["turn"] == "failed"
    assert answer["reason"] == "guardrail-error"
    assert answer["error"]["guardrail"] == "no-refund-promises"
    assert "judge model" in answer["error"]["message"]
    result = next(r for r in answer["results"] if r["guardrail"] == "no-refund-promises")
    assert result["status"] == "error" and result["reason"] == answer["error"]["message"]


def test_the_export_keeps_the_document_as_authored(api: Any, acme: Tenant, alice: User) -> None:
    halting_judge(acme)
    api(alice).put(URL, data={"onError": "halt"}, format="json")
    exported = api(alice).get("/api/v1/guardrails/no-refund-promises").json()
    assert "onError" not in str(exported)


def test_only_a_halt_guardrail_fails_closed_and_errors_name_the_field(api: Any, acme: Tenant, alice: User) -> None:
    save_guardrail(judge_document(), Author(user=None, label="fixture"), owner=acme)  # action: flag
    refused = api(alice).put(URL, data={"onError": "halt"}, format="json")
    assert refused.status_code == 400
    assert refused.json()["errors"][0]["path"] == "/onError"
    assert "action is halt" in refused.json()["errors"][0]["message"]

    bad = api(alice).put(URL, data={"onError": "closed"}, format="json")
    assert (bad.status_code, bad.json()["errors"][0]["path"]) == (400, "/onError")
    unknown = api(alice).put(URL, data={"onError": "pass", "mode": 1}, format="json")
    assert (unknown.status_code, unknown.json()["errors"][0]["path"]) == (400, "/mode")


def test_charlie_neither_reads_nor_sets_acmes_fail_mode(
    api: Any, acme: Tenant, charlie: User, charlie_key: str
) -> None:
    halting_judge(acme)
    assert api(charlie_key).get(URL).status_code == 404
    assert api(charlie).put(URL, data={"onError": "halt"}, format="json").status_code == 404


def test_the_guardrail_page_shows_and_sets_the_fail_mode(acme: Tenant, alice: User) -> None:
    guardrail = halting_judge(acme)
    client = Client()
    client.force_login(alice)
    page = client.get(f"/guardrails/{guardrail.guardrail_id}/").content.decode()
    assert "On error: let the turn go on" in page and "Save fail mode" in page

    answer = client.post(f"/guardrails/{guardrail.guardrail_id}/fail-mode/", {"on_error": "halt"})
    assert answer.status_code == 302
    guardrail.refresh_from_db()
    assert guardrail.on_error == "halt"
    assert "On error: halt the turn" in client.get(f"/guardrails/{guardrail.guardrail_id}/").content.decode()


def test_a_guardrail_that_fails_closed_halts_only_at_the_stages_where_it_applies(
    api: Any, acme: Tenant, acme_key: str, alice: User
) -> None:
    halting_judge(acme)
    assert api(alice).put(URL, data={"onError": "halt"}, format="json").status_code == 200
    stages = api(alice).post("/api/v1/guardrails/no-refund-promises/stages", {"stages": ["output"]}, format="json")
    assert stages.status_code == 200, stages.json()

    at_input = api(acme_key).post("/api/v1/evaluate?stage=input", data=make_trace("t-in"), format="json").json()
    assert (at_input["turn"], at_input["reason"], at_input["haltedBy"]) == ("completed", None, None)
    assert "error" not in at_input
    skipped = next(r for r in at_input["results"] if r["guardrail"] == "no-refund-promises")
    assert (skipped["status"], skipped["skipReason"]) == ("skipped", "stage")

    at_output = api(acme_key).post("/api/v1/evaluate?stage=output", data=make_trace("t-out"), format="json").json()
    assert (at_output["turn"], at_output["reason"]) == ("failed", "guardrail-error")
    assert at_output["haltedBy"] == at_output["error"]["guardrail"] == "no-refund-promises"
