"""The zero-llm strategy with the sandbox: pack checks of a sandboxed guardrail run in the pool.

Built-in checks, and every check of a guardrail whose `sandbox` is `none` or absent, run in
the evaluating process through the wrapped strategy. A sandboxed guardrail evaluated
without a pool in `context.services["sandbox"]` gives an error: the check is never run
with less isolation than its guardrail declares.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from guardrails.engine.sandbox.pool import SandboxPool
from guardrails.engine.sandbox.posture import HandlerRef, declared_names, posture_for, sandbox_level
from guardrails.engine.types import Check, CheckOutcome, Context, Guardrail, Strategy, StrategyError, Trace


def _plain(value: Any) -> Any:
    """A JSON-ready copy of a mapping the engine may hold as a read-only view."""
    if isinstance(value, Mapping):
        return {str(key): _plain(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(item) for item in value]
    return value


class SandboxedZeroLlmStrategy:
    """Dispatches a check to the sandbox pool or, for in-process checks, to `inner`."""

    def __init__(self, inner: Strategy) -> None:
        self.inner = inner

    def evaluate(self, guardrail: Guardrail, check: Check, trace: Trace, context: Context) -> CheckOutcome:
        level = sandbox_level(guardrail.document)
        if level == "none" or check.builtin:
            return self.inner.evaluate(guardrail, check, trace, context)
        pool = context.services.get("sandbox")
        if not isinstance(pool, SandboxPool):
            raise StrategyError(
                f"guardrail '{guardrail.id}' asks for the {level} sandbox and no sandbox pool "
                "is available here, so its check is not run"
            )
        document = guardrail.document
        names = declared_names(document)
        env = {name: pool.environ[name] for name in names if name in pool.environ}
        return pool.run(
            posture_for(document, pool.defaults),
            HandlerRef.for_check(check),
            _plain(guardrail.config),
            _plain(trace),
            env,
            tenant=context.tenant or str(trace.get("tenant") or ""),
            check_id=check.id,
        )
