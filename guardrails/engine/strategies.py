"""The execution-strategy registry: how each guardrail kind is evaluated.

`zero-llm` runs the check's function over the trace; `llm-judge` asks the judge model routed
through the JudgeServices the caller binds in `context.services["judge"]` (or a Judge of the
caller's own bound there; see guardrails.engine.judge); the built-in `external`
strategy always gives an error (callers register their own). Adapters register
strategies for kinds of their own.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from guardrails.engine.types import Check, CheckOutcome, Context, Guardrail, PreparedFn, Strategy, StrategyError, Trace


class StrategyRegistry:
    """Strategies by kind; registering a kind again replaces its strategy.

    A strategy may be registered `lazily`: made by a function on its first use, so that a
    run without llm-judge guardrails never imports the judge and its HTTP client.
    """

    def __init__(self, strategies: Mapping[str, Strategy] | None = None) -> None:
        self._strategies: dict[str, Strategy] = dict(strategies or {})
        self._factories: dict[str, Callable[[], Strategy]] = {}

    def register(self, kind: str, strategy: Strategy) -> None:
        if not isinstance(kind, str) or not kind.strip():
            raise ValueError("a strategy's kind must be a non-empty string")
        self._factories.pop(kind, None)
        self._strategies[kind] = strategy

    def register_lazily(self, kind: str, factory: Callable[[], Strategy]) -> None:
        """Register the strategy `factory` makes, made when the kind is first evaluated."""
        if not isinstance(kind, str) or not kind.strip():
            raise ValueError("a strategy's kind must be a non-empty string")
        self._strategies.pop(kind, None)
        self._factories[kind] = factory

    def get(self, kind: str) -> Strategy | None:
        strategy = self._strategies.get(kind)
        if strategy is None and kind in self._factories:
            strategy = self._strategies[kind] = self._factories.pop(kind)()
        return strategy

    def kinds(self) -> list[str]:
        return sorted({*self._strategies, *self._factories})

    def __contains__(self, kind: object) -> bool:
        return kind in self._strategies or kind in self._factories

    def copy(self) -> StrategyRegistry:
        other = StrategyRegistry(self._strategies)
        other._factories = dict(self._factories)
        return other


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

    def inline(self, guardrail: Guardrail, check: Check) -> PreparedFn:
        """The function Engine.plan calls for each trace: the prepared check itself."""
        return self.prepared(guardrail, check)

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


def _llm_judge_strategy() -> Strategy:
    from guardrails.engine.judge import LlmJudgeStrategy

    return LlmJudgeStrategy()


def default_strategies() -> StrategyRegistry:
    """The built-in strategies: zero-llm, llm-judge (guardrails.engine.judge, imported on
    first use) and external."""
    strategies = StrategyRegistry({"zero-llm": ZeroLlmStrategy(), "external": ExternalStrategy()})
    strategies.register_lazily("llm-judge", _llm_judge_strategy)
    return strategies
