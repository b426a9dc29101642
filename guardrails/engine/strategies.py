"""The execution-strategy registry: how each guardrail kind is evaluated.

`zero-llm` runs the check's function over the trace; `llm-judge` asks the judge model routed
through the JudgeServices the caller binds in `context.services["judge"]` (or a Judge of the
caller's own bound there; see guardrails.engine.judge); the built-in `external`
strategy always gives an error (callers register their own). Adapters register
strategies for kinds of their own.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from guardrails.engine.judge import LlmJudgeStrategy
from guardrails.engine.types import (
    Check,
    CheckOutcome,
    Context,
    Guardrail,
    PreparedFn,
    Strategy,
    StrategyError,
    Trace,
)


class StrategyRegistry:
    """Strategies by kind; registering a kind again replaces its strategy."""

    def __init__(self, strategies: Mapping[str, Strategy] | None = None) -> None:
        self._strategies: dict[str, Strategy] = dict(strategies or {})

    def register(self, kind: str, strategy: Strategy) -> None:
        if not isinstance(kind, str) or not kind.strip():
            raise ValueError("a strategy's kind must be a non-empty string")
        self._strategies[kind] = strategy

    def get(self, kind: str) -> Strategy | None:
        return self._strategies.get(kind)

    def kinds(self) -> list[str]:
        return sorted(self._strategies)

    def __contains__(self, kind: object) -> bool:
        return kind in self._strategies

    def copy(self) -> StrategyRegistry:
        return StrategyRegistry(self._strategies)


class ZeroLlmStrategy:
    """Runs the check's function over the trace.

    A check with a `prepare` function has each guardrail's config compiled once and kept,
    keyed by the identity of the guardrail's document and the check, so that evaluating
    one guardrail over many traces compiles its regular expression once.
    """

    _MAX_PREPARED = 4096

    def __init__(self) -> None:
        self._prepared: dict[int, tuple[Mapping[str, Any], Check, PreparedFn]] = {}

    def evaluate(self, guardrail: Guardrail, check: Check, trace: Trace, context: Context) -> CheckOutcome:
        return self.prepared(guardrail, check)(trace)

    def prepared(self, guardrail: Guardrail, check: Check) -> PreparedFn:
        """The check's function over one trace, with this guardrail's config compiled in."""
        document = guardrail.document
        entry = self._prepared.get(id(document))
        # The entry holds the document, so its id cannot be reused while the entry lives.
        if entry is not None and entry[0] is document and entry[1] is check:
            return entry[2]
        function = self._compile(guardrail, check)
        if len(self._prepared) >= self._MAX_PREPARED:
            self._prepared.clear()
        self._prepared[id(document)] = (document, check, function)
        return function

    @staticmethod
    def _compile(guardrail: Guardrail, check: Check) -> PreparedFn:
        config = guardrail.config
        if check.prepare is not None:
            return check.prepare(config)
        evaluate = check.evaluate
        if evaluate is None:
            raise StrategyError(f"check '{check.id}' has no evaluate function")

        def run(trace: Trace) -> CheckOutcome:
            return evaluate(config, trace)

        return run


class ExternalStrategy:
    """The built-in `external` strategy: such guardrails are evaluated outside the engine,
    by a strategy the caller registers; without one the result is an error."""

    def evaluate(self, guardrail: Guardrail, check: Check, trace: Trace, context: Context) -> CheckOutcome:
        raise StrategyError(
            f"guardrail '{guardrail.id}' is of kind 'external': it is evaluated outside the "
            "engine, and no strategy for it is registered here"
        )


def default_strategies() -> StrategyRegistry:
    """The built-in strategies: zero-llm, llm-judge (guardrails.engine.judge) and external."""
    return StrategyRegistry(
        {
            "zero-llm": ZeroLlmStrategy(),
            "llm-judge": LlmJudgeStrategy(),
            "external": ExternalStrategy(),
        }
    )
