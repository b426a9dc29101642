"""The llm-judge strategy end to end: routing, the call, the verdict, the ledger, the cache."""

from decimal import Decimal

import httpx
import pytest

from guardrails.engine.judge import (
    RUBRIC_CHECK_ID,
    InMemoryJudgeServices,
    JudgeModel,
    JudgePolicy,
    LlmJudgeStrategy,
    RetryPolicy,
    cache_key,
    estimate_call,
    rubric_check,
)
from guardrails.engine.types import Context, Guardrail, StrategyError
from tests.fakeproviders import Answer, Fault

TRACE = {
    "id": "run-1",
    "tenant": "acme",
    "input": "Can I get a refund for order 1234?",
    "output": "Yes, a full refund is guaranteed.",
}
STRATEGY = LlmJudgeStrategy(retry=RetryPolicy(base_delay_s=0.01))


def guardrail(revision=3, **fields):
    doc = {
        "id": "no-refund-promises",
        "kind": "llm-judge",
        "check": RUBRIC_CHECK_ID,
        "config": {"criteria": "The agent never promises a refund."},
        "action": {"on-violation": "log-only"},
    }
    doc.update(fields)
    return Guardrail(document=doc, revision=revision)


@pytest.fixture
def http():
    with httpx.Client() as client:
        yield client


@pytest.fixture
def services(fake_provider, http):
    models = [
        JudgeModel.from_dict(
            fake_provider.registration("cheap", pricing={"inputUsdPerMTok": "0.10", "outputUsdPerMTok": "0.40"})
        ),
        JudgeModel.from_dict(
            fake_provider.registration(
                "claude",
                "anthropic",
                capabilities=["json", "reasoning"],
                pricing={"inputUsdPerMTok": "3", "outputUsdPerMTok": "15"},
            )
        ),
    ]
    return InMemoryJudgeServices(models=models, client=http, time_limit_s=5)


def evaluate(services, rail=None, trace=TRACE):
    context = Context.for_trace(trace, "runtime", judge=services)
    return STRATEGY.evaluate(rail or guardrail(), rubric_check(), trace, context)


def test_a_fail_verdict_fails_with_the_judges_reason(fake_provider, services):
    fake_provider.script(
        Answer('{"verdict": "FAIL", "reason": "promises a refund"}', input_tokens=500, output_tokens=20)
    )
    outcome = evaluate(services)
    assert not outcome.passed and outcome.reason == "promises a refund"
    assert outcome.details["model"] == "cheap"
    assert outcome.details["verdict"] == "FAIL" and outcome.details["cached"] is False
    assert outcome.details["costUsd"] == "0.000058"
    assert (outcome.details["inputTokens"], outcome.details["outputTokens"]) == (500, 20)
    [(call, guardrail_id, revision)] = services.calls
    assert (guardrail_id, revision) == ("no-refund-promises", 3)
    assert call.cost_usd == Decimal("0.000058") and call.outcome.verdict == "FAIL"


def test_a_pass_verdict_passes(fake_provider, services):
    fake_provider.script(Answer("PASS - no promise made"))
    outcome = evaluate(services)
    assert outcome.passed and outcome.details["judgeReason"] == "no promise made"


def test_the_judge_sees_only_the_included_parts(fake_provider, services):
    rail = guardrail(config={"criteria": "Polite.", "include": ["output"]})
    fake_provider.script(Answer("PASS"))
    evaluate(services, rail)
    user = fake_provider.requests[0].body["messages"][1]["content"]
    assert "full refund is guaranteed" in user and "order 1234" not in user


@pytest.mark.parametrize(("score", "passed"), [(0.7, True), (0.69, False)])
def test_a_score_passes_at_the_threshold(fake_provider, services, score, passed):
    rail = guardrail(config={"criteria": "Grounded.", "scale": "score", "threshold": 0.7})
    fake_provider.script(Answer(f'{{"score": {score}, "reason": "partly grounded"}}'))
    outcome = evaluate(services, rail)
    assert outcome.passed is passed and outcome.details["score"] == score
    if not passed:
        assert outcome.reason == "judge score 0.69 is below the threshold 0.7: partly grounded"


def test_the_second_evaluation_is_answered_from_the_cache(fake_provider, services):
    fake_provider.script(Answer('{"verdict": "FAIL", "reason": "promises a refund"}'))
    first = evaluate(services)
    second = evaluate(services)
    assert len(fake_provider.requests) == 1 and len(services.calls) == 1
    assert second.passed is first.passed is False and second.reason == "promises a refund"
    assert second.details["cached"] is True and second.details["costUsd"] == "0"


def test_the_cache_key_follows_revision_trace_and_model(fake_provider, services):
    cheap, claude = services.models[0], services.models[1]
    key = cache_key(guardrail(), TRACE, cheap)
    assert key == cache_key(guardrail(), dict(reversed(list(TRACE.items()))), cheap)
    assert key != cache_key(guardrail(revision=4), TRACE, cheap)
    assert key != cache_key(guardrail(), {**TRACE, "output": "No."}, cheap)
    assert key != cache_key(guardrail(), TRACE, claude)
    evaluate(services)
    evaluate(services, guardrail(revision=4))
    assert len(fake_provider.requests) == 2


def test_a_failed_call_is_an_error_recorded_in_the_ledger_and_not_cached(fake_provider, services):
    fake_provider.script(Answer("Hmm.", input_tokens=400, output_tokens=3))
    with pytest.raises(StrategyError) as raised:
        evaluate(services)
    assert str(raised.value).startswith("judge call failed: the judge's answer is neither JSON")
    assert raised.value.details["costUsd"] == "0.0000412"
    [(call, _, _)] = services.calls
    assert call.billed and call.outcome is None
    assert services.cache == {}


def test_a_cut_off_answer_is_an_error_never_a_pass(fake_provider, services):
    fake_provider.script(Answer('{"verdict": "PASS", "reason": "the agent', cut_off=True))
    with pytest.raises(StrategyError, match="cut off by the token limit"):
        evaluate(services)


def test_calls_over_the_budget_are_flagged_not_refused(fake_provider, services):
    rail = guardrail(budget={"maxCostUsd": 0.00005, "maxLatencyMs": 1})
    fake_provider.script(Answer("PASS", input_tokens=500, output_tokens=20, delay_s=0.01))
    outcome = evaluate(services, rail)
    assert outcome.passed
    assert outcome.details["overCost"] is True and outcome.details["overLatency"] is True
    call = services.calls[0][0]
    assert call.over_cost and call.over_latency and call.to_dict()["overCost"] is True


def test_calls_within_the_budget_are_not_flagged(fake_provider, services):
    rail = guardrail(budget={"maxCostUsd": 0.000058, "maxLatencyMs": 60000})
    fake_provider.script(Answer("PASS", input_tokens=500, output_tokens=20))
    evaluate(services, rail)
    call = services.calls[0][0]
    assert call.cost_usd == Decimal("0.000058") and not call.over_cost and not call.over_latency


def test_it_routes_by_capabilities_under_the_tenant_policy(fake_provider, services):
    rail = guardrail(judgeCapabilities={"required": ["reasoning"]})
    fake_provider.script(Answer('{"verdict": "PASS"}'))
    assert evaluate(services, rail).details["model"] == "claude"
    assert fake_provider.requests[0].path == "/v1/messages"
    services.policies = {"acme": JudgePolicy.allowing(["cheap"])}
    with pytest.raises(StrategyError) as raised:
        evaluate(services, guardrail(revision=9, judgeCapabilities={"required": ["reasoning"]}))
    assert str(raised.value) == ("no registered judge model has capabilities reasoning and is allowed for tenant acme")


def test_without_judge_services_no_judge_is_bound():
    context = Context.for_trace(TRACE, "ci")
    with pytest.raises(StrategyError, match="no judge model is bound"):
        STRATEGY.evaluate(guardrail(), rubric_check(), TRACE, context)


def test_a_provider_that_stays_down_is_an_error(fake_provider, services):
    fake_provider.script(*[Fault(500)] * 4)
    with pytest.raises(StrategyError, match="gave up after 4 attempts"):
        evaluate(services)
    assert len(services.calls) == 1 and not services.calls[0][0].billed


def test_the_rubric_config_schema():
    check = rubric_check()
    assert check.kind == "llm-judge" and check.evaluate is None
    assert check.validate_config({"criteria": "Polite.", "include": ["messages"]}) == []
    issues = check.validate_config({"criteria": "Grounded.", "scale": "score"})
    assert [(i.path, i.message) for i in issues] == [("/threshold", "'threshold' is required")]
    bad = check.validate_config({"criteria": " ", "threshold": 2, "include": ["metadata"], "model": "x"})
    assert {i.path for i in bad} == {"/model", "/criteria", "/threshold", "/include/0"}


def test_a_missing_key_is_an_error_and_no_ledger_call(fake_provider, http, monkeypatch):
    monkeypatch.delenv("FAKE_UNSET_KEY", raising=False)
    model = JudgeModel.from_dict(fake_provider.registration("keyed", apiKeyEnv="FAKE_UNSET_KEY"))
    services = InMemoryJudgeServices(models=[model], client=http)
    with pytest.raises(StrategyError, match=r"FAKE_UNSET_KEY .* is not set"):
        evaluate(services)
    assert services.calls == [] and fake_provider.requests == []


def test_the_estimate_is_an_upper_bound_of_the_real_cost(fake_provider, services):
    model = services.models[0]
    estimate = estimate_call(guardrail(), TRACE, model)
    assert estimate.max_output_tokens == 256
    assert estimate.cache_key == cache_key(guardrail(), TRACE, model)
    assert estimate.cost_usd == model.cost_usd(estimate.input_tokens, 256)
    evaluate(services)
    call = services.calls[0][0]
    assert call.input_tokens == estimate.input_tokens  # the fake provider counts the same way
    assert call.cost_usd <= estimate.cost_usd
    thinker = services.models[1]
    assert estimate_call(guardrail(), TRACE, thinker).max_output_tokens == 256
