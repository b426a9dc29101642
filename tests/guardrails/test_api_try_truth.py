"""Try it tells the truth: the mode defaults from the draft's scope, a skip says why, and an
llm-judge draft is judged by the model the tenant's policy routes to, or says plainly why not."""

from __future__ import annotations

from typing import Any

from tests.conftest import make_guardrail, make_trace
from tests.traces.test_judge_ledger import judge_document, local_judge  # noqa: F401 (fixtures)

URL = "/api/v1/guardrails/try"


def test_a_runtime_only_draft_is_tried_at_runtime_unless_asked(api: Any, alice: Any) -> None:
    draft = make_guardrail(scope={"when": "runtime-only"})
    answer = api(alice).post(URL, {"guardrail": draft, "trace": make_trace()}, format="json").json()
    assert answer["mode"] == "runtime" and answer["result"]["status"] == "fail"
    asked = api(alice).post(URL, {"guardrail": draft, "trace": make_trace(), "mode": "ci"}, format="json").json()
    assert asked["result"]["status"] == "skipped"
    assert asked["result"]["reason"] == "the guardrail is runtime-only and this is a ci evaluation"


def test_a_draft_whose_scope_does_not_select_says_which_part(api: Any, alice: Any) -> None:
    draft = make_guardrail(scope={"agents": ["faq-bot"]})
    result = api(alice).post(URL, {"guardrail": draft, "trace": make_trace()}, format="json").json()["result"]
    assert result["status"] == "skipped"
    assert result["reason"] == "scope.agents does not list this trace's agent (support-bot)"


def test_an_llm_judge_draft_is_judged_by_the_tenants_routed_model(
    api: Any, alice: Any, acme: Any, local_judge: Any
) -> None:
    body = {"guardrail": judge_document("draft-judge"), "trace": make_trace(tenant="acme", toolCalls=[])}
    result = api(alice).post(URL, body, format="json").json()["result"]
    assert result["status"] in ("pass", "fail"), result
    details = result["details"]
    assert details["model"] == "local" and details["verdict"] in ("PASS", "FAIL")
    assert details["inputTokens"] and details["costUsd"]


def test_an_llm_judge_draft_without_a_tenant_says_why_in_one_sentence(
    api: Any, alice: Any, acme: Any, globex: Any, local_judge: Any
) -> None:
    from tests.conftest import member

    member("alice2", globex, "author")  # not alice: she stays in acme only
    body = {"guardrail": judge_document("draft-judge"), "trace": make_trace(tenant="globex")}
    result = api(alice).post(URL, body, format="json").json()["result"]
    assert result["status"] == "error"
    assert result["reason"].startswith("An llm-judge guardrail is tried with the judge its tenant's policy")
    assert "context.services" not in result["reason"]
