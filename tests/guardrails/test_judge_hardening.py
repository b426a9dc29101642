"""The judge under hostile conditions, engine side: registrations the console exports, disabled
models, thinking budgets, providers that drip their answers, and keys echoed in errors."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from guardrails.engine.judge import (
    InvalidJudgeModel,
    JudgeModel,
    NoJudgeModel,
    RetryPolicy,
    build_prompt,
    call_judge,
    judge_models_of_export,
    route,
    validate_judge_model,
)
from tests.conftest import guardrail_ci_files, make_trace, run_guardrail_ci_captured
from tests.fakeproviders import Answer, Drip, FakeProvider, Fault

PROMPT = build_prompt("Never promise a refund.", "pass-fail", {"output": "No refunds, sorry."})
FAST = RetryPolicy(max_attempts=4, base_delay_s=0.01, max_delay_s=0.05)


def exported(provider: FakeProvider, id: str, price: str, *, enabled: bool, **fields: Any) -> dict[str, Any]:
    """A registration as `GET /api/v1/judge-models` answers it."""
    doc = provider.registration(
        id, pricing={"inputUsdPerMTok": price, "outputUsdPerMTok": price}, model=f"model-{id}", **fields
    )
    return {**doc, "enabled": enabled, "apiKeySet": None}


# ------------------------------------------------------------------ registrations and routing


def test_an_anthropic_thinking_budget_under_1024_is_refused_with_its_pointer() -> None:
    doc = {
        "id": "claude",
        "provider": "anthropic",
        "model": "claude-x",
        "baseUrl": "https://api.anthropic.com",
        "pricing": {"inputUsdPerMTok": 3, "outputUsdPerMTok": 15},
        "thinking": {"budgetTokens": 500},
    }
    issues = validate_judge_model(doc)
    assert [issue.path for issue in issues] == ["/thinking/budgetTokens"]
    assert "1024" in issues[0].message
    assert validate_judge_model({**doc, "thinking": {"budgetTokens": 1024}}) == []


def test_a_guardrail_pinned_to_a_disabled_model_is_told_it_is_disabled(fake_provider: FakeProvider) -> None:
    [cheap, dear] = judge_models_of_export(
        [exported(fake_provider, "cheap", "0.1", enabled=False), exported(fake_provider, "dear", "9", enabled=True)]
    )
    with pytest.raises(NoJudgeModel, match=r"'cheap' named by judgeCapabilities\.model is disabled"):
        route([cheap, dear], {"model": "cheap"})
    assert route([cheap, dear], None).id == "dear"  # never the disabled one, however cheap
    with pytest.raises(NoJudgeModel, match="every registered judge model is disabled"):
        route([cheap], None)


def test_the_export_is_taken_as_the_api_answers_it_array_or_page(fake_provider: FakeProvider) -> None:
    items = [exported(fake_provider, "a", "1", enabled=True, apiKeyEnv="A_KEY")]
    items[0]["apiKeySet"] = False
    assert [m.id for m in judge_models_of_export(items)] == ["a"]
    assert [m.id for m in judge_models_of_export({"next": None, "results": items})] == ["a"]
    with pytest.raises(InvalidJudgeModel) as raised:
        judge_models_of_export({"next": "https://console/x?cursor=abc", "results": items})
    assert [i.path for i in raised.value.issues] == ["/next"]
    with pytest.raises(InvalidJudgeModel) as raised:
        judge_models_of_export([{**items[0], "enabled": "yes", "apiKey": "sk-1"}])
    assert sorted(i.path for i in raised.value.issues) == ["/0/apiKey", "/0/enabled"]


def test_ci_routes_past_a_disabled_registration_as_production_does(tmp_path: Path) -> None:
    guardrail = {
        "id": "judged",
        "kind": "llm-judge",
        "check": "rubric",
        "config": {"criteria": "No refunds."},
        "action": {"on-violation": "block"},
        "severity": "error",
    }
    with FakeProvider() as provider:
        provider.script(Answer('{"verdict": "PASS"}'))
        judges = [exported(provider, "cheap-off", "0.1", enabled=False), exported(provider, "on", "2", enabled=True)]
        status, out, err = run_guardrail_ci_captured(guardrail_ci_files(tmp_path, guardrail, judges, [make_trace("a")]))
        asked = [request.body["model"] for request in provider.requests]
    assert status == 0, out + err
    assert asked == ["model-on"]


# ------------------------------------------------------------------ the call's total deadline


@pytest.fixture
def http() -> Any:
    with httpx.Client() as client:
        yield client


def test_a_provider_that_drips_its_answer_is_cut_off_at_the_deadline(fake_provider: FakeProvider, http: Any) -> None:
    """Headers at once, then four bytes every 0.2 s: each read is quick, the whole is not."""
    fake_provider.script(Drip(Answer('{"verdict": "PASS", "reason": "late"}'), chunk=4, interval_s=0.2))
    model = JudgeModel.from_dict(fake_provider.registration("drip"))
    started = time.monotonic()
    result = call_judge(model, PROMPT, http=http, deadline=started + 1.0, retry=FAST)
    elapsed = time.monotonic() - started
    assert result.outcome is None  # the late PASS never counts
    assert "time limit" in (result.error or "")
    assert elapsed < 1.8, elapsed


def test_a_provider_that_drips_its_headers_is_cut_off_at_the_deadline(fake_provider: FakeProvider, http: Any) -> None:
    fake_provider.script(Drip(Answer('{"verdict": "PASS"}'), chunk=2, interval_s=0.2, headers_too=True))
    model = JudgeModel.from_dict(fake_provider.registration("drip"))
    started = time.monotonic()
    result = call_judge(model, PROMPT, http=http, deadline=started + 1.0, retry=FAST)
    assert result.outcome is None and time.monotonic() - started < 1.8


def test_an_answer_larger_than_the_bound_is_an_error(fake_provider: FakeProvider, http: Any) -> None:
    fake_provider.script(Answer('{"verdict": "PASS", "reason": "' + "x" * 2_000_000 + '"}'))
    model = JudgeModel.from_dict(fake_provider.registration("big"))
    result = call_judge(model, PROMPT, http=http, deadline=time.monotonic() + 10, retry=FAST)
    assert result.outcome is None and "larger than" in (result.error or "")


def test_a_dripped_attempt_within_its_own_limit_is_retried(fake_provider: FakeProvider, http: Any) -> None:
    """attempt_timeout_s bounds one attempt in total, so a stalled attempt leaves time for another."""
    fake_provider.script(Drip(Answer('{"verdict": "FAIL"}'), chunk=4, interval_s=0.2), Answer('{"verdict": "PASS"}'))
    model = JudgeModel.from_dict(fake_provider.registration("drip"))
    patient = RetryPolicy(max_attempts=2, base_delay_s=0.01, max_delay_s=0.01, attempt_timeout_s=0.5)
    result = call_judge(model, PROMPT, http=http, deadline=time.monotonic() + 5, retry=patient)
    assert result.outcome is not None and result.outcome.verdict == "PASS"
    assert result.attempts == 2


# ------------------------------------------------------------------ keys echoed by a provider


def test_a_provider_error_echoing_the_key_is_redacted(fake_provider: FakeProvider, http: Any, monkeypatch: Any) -> None:
    monkeypatch.setenv("ECHO_KEY", "sk-live-0123456789abcdef")
    fake_provider.script(Fault(400, "Incorrect API key provided: sk-live-0123456789abcdef."))
    model = JudgeModel.from_dict(fake_provider.registration("echo", apiKeyEnv="ECHO_KEY"))
    result = call_judge(model, PROMPT, http=http, deadline=time.monotonic() + 5, retry=FAST)
    assert result.error is not None
    assert "sk-live-0123456789abcdef" not in result.error
    assert "Incorrect API key provided: [redacted]" in result.error


# ------------------------------------------------------------------ the cache key


def test_the_cache_key_changes_with_the_registrations_model_and_server(fake_provider: FakeProvider) -> None:
    from dataclasses import replace

    from guardrails.engine.judge import cache_key
    from guardrails.engine.types import Guardrail

    rail = Guardrail(
        document={
            "id": "g",
            "kind": "llm-judge",
            "check": "rubric",
            "config": {"criteria": "c"},
            "action": {"on-violation": "flag"},
        },
        revision=1,
    )
    model = JudgeModel.from_dict(fake_provider.registration("judge"))
    key = cache_key(rail, {"output": "x"}, model)
    assert key != cache_key(rail, {"output": "x"}, replace(model, model="another-model"))
    assert key != cache_key(rail, {"output": "x"}, replace(model, base_url="http://127.0.0.1:1/v1"))
    assert key == cache_key(rail, {"output": "x"}, replace(model, input_usd_per_mtok=model.input_usd_per_mtok * 2))
