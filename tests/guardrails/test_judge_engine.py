"""The judge inside the engine: the rubric check is built in, guardrails register and evaluate."""

import httpx
import pytest

from guardrails.engine.evaluate import Engine, evaluate_all, evaluate_guardrail
from guardrails.engine.judge import InMemoryJudgeServices, JudgeModel, LlmJudgeStrategy, register_judge
from guardrails.engine.registration import define_guardrail
from guardrails.engine.registry import CheckRegistry, default_registry
from guardrails.engine.strategies import StrategyRegistry, default_strategies
from guardrails.engine.types import Context
from tests.fakeproviders import Answer

TRACE = {"id": "run-7", "tenant": "acme", "input": "Refund?", "output": "Refund guaranteed!"}


def document(**fields):
    doc = {
        "id": "no-refund-promises",
        "kind": "llm-judge",
        "check": "rubric",
        "config": {"criteria": "The agent never promises a refund."},
        "action": {"on-violation": "halt"},
        "judgeCapabilities": {"required": ["json"]},
        "budget": {"maxCostUsd": 0.01, "maxLatencyMs": 30000},
    }
    doc.update(fields)
    return doc


@pytest.fixture
def services(fake_provider):
    with httpx.Client() as client:
        model = JudgeModel.from_dict(fake_provider.registration("local"))
        yield InMemoryJudgeServices(models=[model], client=client, time_limit_s=5)


def test_the_rubric_check_and_its_strategy_are_built_in():
    check = default_registry().get("rubric")
    assert check is not None and check.kind == "llm-judge" and check.builtin
    assert isinstance(default_strategies().get("llm-judge"), LlmJudgeStrategy)


def test_register_judge_fills_empty_registries():
    registry, strategies = CheckRegistry(), StrategyRegistry()
    register_judge(registry, strategies)
    register_judge(registry, strategies)  # again: harmless
    assert "rubric" in registry and strategies.kinds() == ["llm-judge"]


def test_an_llm_judge_guardrail_registers_with_its_config_and_capabilities_checked():
    registry = default_registry()
    assert define_guardrail(document(), registry=registry, revision=1).valid
    bad = define_guardrail(
        document(config={"criteria": "Grounded.", "scale": "score"}, judgeCapabilities={"requierd": ["json"]}),
        registry=registry,
    )
    assert [(issue.path, issue.message) for issue in bad.errors] == [
        ("/config/threshold", "'threshold' is required"),
        ("/judgeCapabilities/requierd", "unknown field 'requierd'"),
    ]


def test_a_failing_halt_judge_fails_the_turn_and_the_cache_answers_again(fake_provider, services):
    guardrail = define_guardrail(document(), registry=default_registry(), revision=2).guardrail
    assert guardrail is not None
    context = Context.for_trace(TRACE, "runtime", judge=services)
    fake_provider.script(Answer('{"verdict": "FAIL", "reason": "promises a refund"}'))
    verdict = evaluate_all([guardrail], TRACE, context, engine=Engine.default())
    assert (verdict.turn, verdict.reason) == ("failed", "guardrail-violation")
    [result] = verdict.results
    assert (result.status, result.reason, result.revision) == ("fail", "promises a refund", 2)
    assert result.details["cached"] is False and result.details["model"] == "local"
    again = evaluate_guardrail(guardrail, TRACE, context)
    assert again.status == "fail" and again.details["cached"] is True
    assert len(fake_provider.requests) == 1 and len(services.calls) == 1


def test_a_judge_error_is_an_error_result_never_a_pass(fake_provider, services):
    guardrail = define_guardrail(document(), registry=default_registry()).guardrail
    assert guardrail is not None
    fake_provider.script(Answer("Sure, happy to help!"))
    result = evaluate_guardrail(guardrail, TRACE, Context.for_trace(TRACE, "ci", judge=services))
    assert result.status == "error"
    assert result.reason.startswith("judge call failed: the judge's answer is neither JSON")
    assert result.details["costUsd"] != "0"


def test_without_a_judge_the_result_says_none_is_bound():
    guardrail = define_guardrail(document(), registry=default_registry()).guardrail
    assert guardrail is not None
    result = evaluate_guardrail(guardrail, TRACE, Context.for_trace(TRACE, "ci"))
    assert result.status == "error" and result.reason.startswith("no judge model is bound")
