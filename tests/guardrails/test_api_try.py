"""`POST /api/v1/guardrails/try`: an unsaved guardrail against one trace, nothing stored."""

from __future__ import annotations

from typing import Any

from guardrails.models import Guardrail
from tests.conftest import make_guardrail, make_trace
from traces.models import EvaluationResult, RunTrace

URL = "/api/v1/guardrails/try"


def test_it_evaluates_a_pasted_trace_and_stores_nothing(api: Any, alice: Any) -> None:
    response = api(alice).post(URL, {"guardrail": make_guardrail(), "trace": make_trace()}, format="json")
    assert response.status_code == 200
    result = response.json()["result"]
    assert result["guardrail"] == "no-refunds"
    assert result["status"] == "fail" and "issue_refund" in result["reason"]
    assert result["action"] == "halt" and result["severity"] == "critical"
    assert not Guardrail.objects.exists() and not RunTrace.objects.exists()
    assert not EvaluationResult.objects.exists()


def test_a_passing_trace_passes(api: Any, alice: Any) -> None:
    trace = make_trace(toolCalls=[])
    response = api(alice).post(URL, {"guardrail": make_guardrail(), "trace": trace}, format="json")
    assert response.json()["result"]["status"] == "pass"


def test_mode_selects_by_scope(api: Any, alice: Any) -> None:
    guardrail = make_guardrail(scope={"when": "ci-only"})
    body = {"guardrail": guardrail, "trace": make_trace(), "mode": "runtime"}
    assert api(alice).post(URL, body, format="json").json()["result"]["status"] == "skipped"
    body["mode"] = "ci"
    assert api(alice).post(URL, body, format="json").json()["result"]["status"] == "fail"


def test_errors_point_into_the_guardrail_and_the_trace(api: Any, alice: Any) -> None:
    body = {
        "guardrail": make_guardrail(severity="urgent", config={"tools": "issue_refund"}),
        "trace": {"id": 7},
        "mode": "later",
    }
    response = api(alice).post(URL, body, format="json")
    assert response.status_code == 400
    paths = {error["path"] for error in response.json()["errors"]}
    assert "/guardrail/severity" in paths
    assert "/trace/id" in paths
    assert "/mode" in paths


def test_a_registration_error_lands_on_the_config(api: Any, alice: Any) -> None:
    body = {"guardrail": make_guardrail(config={"tools": "issue_refund"}), "trace": make_trace()}
    paths = [e["path"] for e in api(alice).post(URL, body, format="json").json()["errors"]]
    assert any(path.startswith("/guardrail/config") for path in paths)


def test_it_reads_a_stored_trace_of_the_callers_tenant(api: Any, alice: Any, acme_key: str) -> None:
    assert api(acme_key).post("/api/v1/traces", make_trace("stored-1"), format="json").status_code == 201
    body = {"guardrail": make_guardrail(), "traceId": "stored-1"}
    response = api(alice).post(URL, body, format="json")
    assert response.status_code == 200 and response.json()["result"]["status"] == "fail"


def test_charlie_cannot_try_against_acmes_trace(api: Any, charlie: Any, acme_key: str) -> None:
    api(acme_key).post("/api/v1/traces", make_trace("stored-1"), format="json")
    response = api(charlie).post(URL, {"guardrail": make_guardrail(), "traceId": "stored-1"}, format="json")
    assert response.status_code == 400
    assert response.json()["errors"][0]["path"] == "/traceId"


def test_it_needs_a_trace(api: Any, alice: Any) -> None:
    response = api(alice).post(URL, {"guardrail": make_guardrail()}, format="json")
    assert response.status_code == 400 and response.json()["errors"][0]["path"] == "/trace"


def test_a_body_that_is_not_an_object_is_400(api: Any, alice: Any) -> None:
    response = api(alice).post(URL, [1, 2], format="json")
    assert response.status_code == 400 and response.json()["errors"][0]["path"] == ""


def test_a_reviewer_may_not_try(api: Any, bob: Any) -> None:
    response = api(bob).post(URL, {"guardrail": make_guardrail(), "trace": make_trace()}, format="json")
    assert response.status_code == 403


def test_a_visitor_may_not_try(api: Any, db: Any) -> None:
    response = api().post(URL, {"guardrail": make_guardrail(), "trace": make_trace()}, format="json")
    assert response.status_code in (401, 403)


def test_the_checks_answer_has_what_the_editor_needs(api: Any, bob: Any) -> None:
    checks = {check["id"]: check for check in api(bob).get("/api/v1/checks").json()}
    never = checks["never-call-tool"]
    assert {"id", "kind", "configSchema", "builtin", "pack", "description"} <= set(never)
    assert never["kind"] == "zero-llm" and never["builtin"] is True and never["pack"] is None
    assert never["configSchema"]["type"] == "object" and never["description"]


def test_a_trace_id_with_a_nul_is_a_400_naming_it(api: Any, alice: Any) -> None:
    response = api(alice).post(URL, {"guardrail": make_guardrail(), "traceId": "run-\x00"}, format="json")
    assert response.status_code == 400
    assert {"path": "/traceId", "message": "the NUL character is not allowed"} in response.json()["errors"]
