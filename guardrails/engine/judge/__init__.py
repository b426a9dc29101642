"""The llm-judge: judge models, routing, provider protocols, the prompt, answers and the call.

Pure Python over httpx; the console supplies JudgeServices (models, policies, cache, ledger).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..types import Check
from .circuit import CircuitBreaker, CircuitPolicy, CircuitStore, CircuitView, MemoryCircuitStore, circuit_key
from .client import JudgeCall, RetryPolicy, call_judge
from .models import (
    JUDGE_MODEL_SCHEMA,
    JUDGE_POLICY_SCHEMA,
    InvalidJudgeModel,
    JudgeModel,
    JudgePolicy,
    Thinking,
    judge_models_of_export,
    validate_judge_model,
)
from .parsing import AnswerError, JudgeOutcome, parse_answer
from .prompt import JudgePrompt, build_prompt
from .routing import JUDGE_CAPABILITIES_SCHEMA, NoJudgeModel, route, validate_judge_capabilities
from .strategy import (
    KIND,
    RUBRIC_CHECK_ID,
    RUBRIC_CONFIG_SCHEMA,
    InMemoryJudgeServices,
    Judge,
    JudgeEstimate,
    JudgeServices,
    LlmJudgeStrategy,
    Rubric,
    cache_key,
    estimate_call,
    route_for,
    rubric_check,
)

if TYPE_CHECKING:  # the engine's registries import this package: no runtime import back
    from ..registry import CheckRegistry
    from ..strategies import StrategyRegistry

__all__ = [
    "JUDGE_CAPABILITIES_SCHEMA",
    "JUDGE_MODEL_SCHEMA",
    "JUDGE_POLICY_SCHEMA",
    "KIND",
    "RUBRIC_CHECK_ID",
    "RUBRIC_CONFIG_SCHEMA",
    "AnswerError",
    "CircuitBreaker",
    "CircuitPolicy",
    "CircuitStore",
    "CircuitView",
    "InMemoryJudgeServices",
    "InvalidJudgeModel",
    "Judge",
    "JudgeCall",
    "JudgeEstimate",
    "JudgeModel",
    "JudgeOutcome",
    "JudgePolicy",
    "JudgePrompt",
    "JudgeServices",
    "LlmJudgeStrategy",
    "MemoryCircuitStore",
    "NoJudgeModel",
    "RetryPolicy",
    "Rubric",
    "Thinking",
    "build_prompt",
    "cache_key",
    "call_judge",
    "circuit_key",
    "estimate_call",
    "judge_checks",
    "judge_models_of_export",
    "parse_answer",
    "register_judge",
    "route",
    "route_for",
    "rubric_check",
    "validate_judge_capabilities",
    "validate_judge_model",
]


def judge_checks() -> list[Check]:
    """The built-in llm-judge checks."""
    return [rubric_check()]


def register_judge(registry: CheckRegistry, strategies: StrategyRegistry, *, retry: RetryPolicy | None = None) -> None:
    """Add the built-in llm-judge checks to `registry` and the llm-judge strategy to
    `strategies` (default_registry and default_strategies already hold them)."""
    for check in judge_checks():
        if check.id not in registry:
            registry.register(check)
    strategies.register(KIND, LlmJudgeStrategy(retry=retry))
