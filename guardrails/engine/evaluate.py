"""Evaluating guardrails against a trace: scope, statuses, actions and the turn outcome.

Every path (the REST verdict, ingestion, batch runs, the CI command) goes through
`Engine.verdict`, so that the same guardrail and trace give the same result everywhere.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import cache
from time import monotonic, perf_counter
from typing import Any

from guardrails.engine.registry import CheckRegistry, default_registry
from guardrails.engine.strategies import StrategyRegistry, default_strategies
from guardrails.engine.types import (
    PASSED,
    CheckOutcome,
    Context,
    Guardrail,
    Result,
    Status,
    StrategyError,
    Trace,
    TurnVerdict,
    describe_exception,
    returned_name,
)

#: A verdict without the bookkeeping of a Result: status, reason and details.
Verdict = tuple[Status, str | None, Mapping[str, Any]]

_NO_DETAILS: Mapping[str, Any] = {}
_PASSED: Verdict = ("pass", None, _NO_DETAILS)

_SCOPE_MODES = {
    "always": frozenset({"runtime", "ci"}),
    "ci-only": frozenset({"ci"}),
    "runtime-only": frozenset({"runtime"}),
}

#: Why a guardrail skipped a trace: the part of its scope that did not select it.
#: `runtime-only` and `ci-only` are `when` in the other mode; `when` is a value the engine
#: does not know (schema validation refuses it, a hand-built document may not).
#: `stage` is the runtime's: the guardrail does not apply at the stage of the turn checked
#: (guardrails.engine.stages).
SKIP_PARTS = ("runtime-only", "ci-only", "when", "agents", "flows", "tenants", "stage")
_SKIP_SENTENCES = {
    "runtime-only": "the guardrail is runtime-only and this is a ci evaluation",
    "ci-only": "the guardrail is ci-only and this is a runtime evaluation",
    "when": "scope.when does not select mode {mode}",
    "agents": "scope.agents does not list this trace's agent ({agent})",
    "flows": "scope.flows does not list this trace's flow ({flow})",
    "tenants": "scope.tenants does not list this trace's tenant ({tenant})",
}


class Engine:
    """A check registry and a strategy registry: what evaluating needs.

    `redact`, when set, is applied to every error's reason and text details before they
    leave the engine, so that a secret echoed in an error (a provider quoting the key it
    refused, a check's exception) is never stored or shown.
    """

    def __init__(
        self, registry: CheckRegistry, strategies: StrategyRegistry, *, redact: Callable[[str], str] | None = None
    ) -> None:
        self.registry = registry
        self.strategies = strategies
        self.redact = redact

    @classmethod
    def default(cls) -> Engine:
        """A fresh engine with the built-in checks and strategies."""
        return cls(default_registry(), default_strategies())

    def verdict(self, guardrail: Guardrail, trace: Trace, context: Context) -> Verdict:
        """The status of `guardrail` on `trace` in `context`; never raises."""
        miss = scope_miss(guardrail, context)
        if miss is not None:
            return skipped_verdict(miss, context)
        verdict = self._verdict(guardrail, trace, context)
        if verdict[0] == "error" and self.redact is not None:
            return _redacted(verdict, self.redact)
        return verdict

    def _verdict(self, guardrail: Guardrail, trace: Trace, context: Context) -> Verdict:
        try:
            outcome = self._run_check(guardrail, trace, context)
        except Exception as exc:  # a check that raises gives error, never a crash of the run
            return _error_verdict(guardrail.check, exc)
        return _outcome_verdict(guardrail.check, outcome)

    def _run_check(self, guardrail: Guardrail, trace: Trace, context: Context) -> CheckOutcome:
        return self._resolve(guardrail, context)(trace)

    def _resolve(self, guardrail: Guardrail, context: Context) -> Callable[[Trace], CheckOutcome]:
        """The guardrail's check as a function of the trace (StrategyError when it has none).

        A strategy with an `inline(guardrail, check)` method may hand back the check's own
        prepared function, which the plan then calls with nothing in between.
        """
        check = self.registry.get(guardrail.check)
        if check is None:
            raise StrategyError(f"check '{guardrail.check}' is not registered")
        if check.kind != guardrail.kind:
            raise StrategyError(f"check '{check.id}' is of kind '{check.kind}', not '{guardrail.kind}'")
        strategy = self.strategies.get(guardrail.kind)
        if strategy is None:
            raise StrategyError(f"no strategy is registered for kind '{guardrail.kind}'")
        inline = getattr(strategy, "inline", None)
        prepared: Callable[[Trace], CheckOutcome] | None = inline(guardrail, check) if inline else None
        if prepared is not None:
            return prepared

        def run(trace: Trace) -> CheckOutcome:
            return strategy.evaluate(guardrail, check, trace, context)

        return run

    def plan(self, guardrails: Sequence[Guardrail], context: Context) -> Plan:
        """The guardrails' verdicts for every trace of one context, with scope and checks
        resolved once: what a loop over many traces of one (tenant, agent, flow) calls."""
        steps: list[tuple[str, Step]] = []
        for guardrail in guardrails:
            miss = scope_miss(guardrail, context)
            if miss is not None:  # the same skip, with its reason, for every trace of the context
                steps.append((guardrail.check, skipped_verdict(miss, context)))
                continue
            try:
                steps.append((guardrail.check, self._resolve(guardrail, context)))
            except Exception as exc:  # each trace gets the error Engine.verdict would give
                steps.append((guardrail.check, _raiser(exc)))
        return Plan(steps, self.redact)


#: A plan's step: the check as a function of the trace, or the skipped verdict of its scope.
Step = Callable[[Trace], CheckOutcome] | Verdict


class Plan:
    """Guardrails resolved for one context: `verdicts(trace)` is Engine.verdict for each of
    them, in order (errors redacted as the engine redacts them), with nothing allocated for
    a pass or a skip."""

    __slots__ = ("_fixed", "_runs", "redact", "steps")

    def __init__(self, steps: list[tuple[str, Step]], redact: Callable[[str], str] | None = None) -> None:
        self.steps = steps
        self.redact = redact
        # What `verdicts` starts from: each skip in its place, a pass where a check runs
        # (replaced when it does not pass); only the checks that run are visited.
        self._fixed: list[Verdict] = []
        self._runs: list[tuple[int, str, Callable[[Trace], CheckOutcome]]] = []
        for index, (check_id, run) in enumerate(steps):
            if isinstance(run, tuple):
                self._fixed.append(run)
            else:
                self._fixed.append(_PASSED)
                self._runs.append((index, check_id, run))

    def verdicts(self, trace: Trace) -> list[Verdict]:
        verdicts = self._fixed.copy()
        for index, check_id, run in self._runs:
            try:
                outcome = run(trace)
            except Exception as exc:  # a check that raises gives error, never a crash of the run
                verdicts[index] = self._shown(_error_verdict(check_id, exc))
                continue
            if outcome is not PASSED:
                verdict = _outcome_verdict(check_id, outcome)
                verdicts[index] = verdict if verdict[0] != "error" else self._shown(verdict)
        return verdicts

    def verdict(self, index: int, trace: Trace) -> Verdict:
        """Engine.verdict of the plan's `index`th guardrail on `trace` (as `verdicts` gives
        it): for a caller that evaluates some of the guardrails only, or times each."""
        check_id, run = self.steps[index]
        if isinstance(run, tuple):
            return run
        try:
            outcome = run(trace)
        except Exception as exc:  # a check that raises gives error, never a crash of the run
            return self._shown(_error_verdict(check_id, exc))
        return _PASSED if outcome is PASSED else self._shown(_outcome_verdict(check_id, outcome))

    def _shown(self, verdict: Verdict) -> Verdict:
        if verdict[0] == "error" and self.redact is not None:
            return _redacted(verdict, self.redact)
        return verdict


def _raiser(exc: Exception) -> Callable[[Trace], CheckOutcome]:
    def run(trace: Trace) -> CheckOutcome:
        raise exc.with_traceback(None)  # each raise would otherwise lengthen its traceback

    return run


def _error_verdict(check_id: str, exc: Exception) -> Verdict:
    if isinstance(exc, StrategyError):
        return ("error", str(exc) or type(exc).__name__, exc.details)
    return ("error", f"check '{check_id}' raised {describe_exception(exc)}", {})


def _outcome_verdict(check_id: str, outcome: object) -> Verdict:
    if not isinstance(outcome, CheckOutcome) or not isinstance(outcome.passed, bool):
        return ("error", f"check '{check_id}' returned {returned_name(outcome)}", {})
    if outcome.passed:
        return _PASSED if not outcome.details else ("pass", None, outcome.details)
    return ("fail", outcome.reason or f"check '{check_id}' failed", outcome.details)


def _redacted(verdict: Verdict, redact: Callable[[str], str]) -> Verdict:
    """An error verdict with its reason and text details redacted."""
    status, reason, details = verdict
    return (
        status,
        None if reason is None else redact(reason),
        {name: redact(value) if isinstance(value, str) else value for name, value in details.items()},
    )


@cache
def _shared_engine() -> Engine:
    return Engine.default()


def selects(guardrail: Guardrail, context: Context) -> bool:
    """Whether the guardrail's scope selects this context (evaluation.md, Context and scope)."""
    return scope_miss(guardrail, context) is None


def scope_miss(guardrail: Guardrail, context: Context) -> str | None:
    """The first part of the guardrail's scope that does not select this context (one of
    SKIP_PARTS), or None when the scope selects it."""
    scope = guardrail.scope
    if not scope:
        return None
    when = scope.get("when", "always")
    if context.mode not in _SCOPE_MODES.get(when, frozenset()):
        return when if when in ("runtime-only", "ci-only") else "when"
    for part, value in (("agents", context.agent), ("flows", context.flow), ("tenants", context.tenant)):
        if not _listed(scope.get(part), value):
            return part
    return None


def skipped_verdict(part: str, context: Context) -> Verdict:
    """A `skipped` verdict whose reason says which part of the scope did not select the
    trace; `details["skip"]` names the part (one of SKIP_PARTS) for those who store it."""
    values = {
        "mode": context.mode,
        "agent": context.agent or "none",
        "flow": context.flow or "none",
        "tenant": context.tenant or "none",
    }
    return ("skipped", _SKIP_SENTENCES[part].format(**values), {"skip": part})


def _listed(values: list[str] | None, value: str | None) -> bool:
    """A missing or empty list selects every value; a trace without the value is not selected."""
    return not values or value in values


def evaluate_guardrail(guardrail: Guardrail, trace: Trace, context: Context, *, engine: Engine | None = None) -> Result:
    """Evaluate one guardrail against one trace; a failure to evaluate is an `error` result."""
    engine = engine or _shared_engine()
    started = perf_counter()
    status, reason, details = engine.verdict(guardrail, trace, context)
    return Result(
        guardrail=guardrail.id,
        revision=guardrail.revision,
        status=status,
        action=guardrail.on_violation,
        severity=guardrail.severity,
        reason=reason,
        duration_ms=(perf_counter() - started) * 1000,
        details=details,
    )


def evaluate_all(
    guardrails: Iterable[Guardrail],
    trace: Trace,
    context: Context,
    *,
    engine: Engine | None = None,
    deadline: float | None = None,
) -> TurnVerdict:
    """Evaluate every guardrail; at runtime a failed `halt` guardrail fails the turn.

    `deadline`, a time.monotonic() instant, ends the evaluation: every guardrail that it
    selects and that is still to be evaluated then is an `error` with reason "deadline".
    """
    results = [
        _past_deadline(g)
        if deadline is not None and monotonic() >= deadline and selects(g, context)
        else evaluate_guardrail(g, trace, context, engine=engine)
        for g in guardrails
    ]
    halted = context.mode == "runtime" and any(
        result.status == "fail" and result.action == "halt" for result in results
    )
    if halted:
        return TurnVerdict(turn="failed", reason="guardrail-violation", results=results)
    return TurnVerdict(turn="completed", reason=None, results=results)


def _past_deadline(guardrail: Guardrail) -> Result:
    """The result of a guardrail not evaluated because the evaluation's time ran out."""
    return Result(
        guardrail=guardrail.id,
        revision=guardrail.revision,
        status="error",
        action=guardrail.on_violation,
        severity=guardrail.severity,
        reason="deadline",
        duration_ms=0.0,
        details={},
    )
