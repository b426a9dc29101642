"""What a deployment evaluates with, built from plain values: one recipe for two callers.

The console (guardrails.deployment, from Django settings) and the CI command (cli/, from
the environment, without Django) both build their engine, handler environment and
registration policy here, so that the same sandboxed guardrail gives the same result on
both paths: the same checks (built-ins and packs), the same strategies (zero-llm through the
sandbox), the same environment handed to handlers.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from guardrails.engine.evaluate import Engine
from guardrails.engine.packs import load_packs
from guardrails.engine.registration import RegistrationPolicy
from guardrails.engine.registry import CheckRegistry, default_registry
from guardrails.engine.strategies import StrategyRegistry, ZeroLlmStrategy, default_strategies
from guardrails.engine.types import Check, CheckOutcome, Context, Guardrail, Issue, PreparedFn, Strategy, Trace

#: The `sandbox` values that run a check in the evaluating process (the schema allows
#: these and the sandboxed postures, "context-isolated" and "strict").
_IN_PROCESS = (None, "none")

#: The console's own configuration and credentials: never handed to a check, whatever its
#: needsSpec says and even when an operator lists the name for checks.
CONSOLE_PREFIXES = ("DJANGO_", "KINDGI_", "CELERY_", "DATABASE_", "REDIS_")
CONSOLE_NAMES = frozenset({"OPENAI_API_KEY", "ANTHROPIC_API_KEY", "SECRET_KEY", "PGPASSWORD"})


def is_console_name(name: str) -> bool:
    """Whether the console itself reads this variable (so no check may ever be given it)."""
    return name in CONSOLE_NAMES or name.startswith(CONSOLE_PREFIXES)


class SandboxOnDemand:
    """The deployment's zero-llm strategy: pack checks of sandboxed guardrails go to the
    sandbox (SandboxedZeroLlmStrategy, imported with the sandbox when first needed), every
    other check runs in process, with no sandbox import for a run that has none."""

    def __init__(self, inner: ZeroLlmStrategy) -> None:
        self.inner = inner
        self._sandboxed: Strategy | None = None

    def _strategy(self, guardrail: Guardrail, check: Check) -> Strategy:
        if check.builtin or guardrail.document.get("sandbox") in _IN_PROCESS:
            return self.inner
        if self._sandboxed is None:
            from guardrails.engine.sandbox.strategy import SandboxedZeroLlmStrategy

            self._sandboxed = SandboxedZeroLlmStrategy(self.inner)
        return self._sandboxed

    def evaluate(self, guardrail: Guardrail, check: Check, trace: Trace, context: Context) -> CheckOutcome:
        return self._strategy(guardrail, check).evaluate(guardrail, check, trace, context)

    def inline(self, guardrail: Guardrail, check: Check) -> PreparedFn | None:
        """For Engine.plan: the in-process check's own function; None for a sandboxed one."""
        strategy = self._strategy(guardrail, check)
        return self.inner.inline(guardrail, check) if strategy is self.inner else None


def deployment_strategies() -> StrategyRegistry:
    """The built-in strategies, zero-llm running pack checks of sandboxed guardrails in the pool."""
    strategies = default_strategies()
    strategies.register("zero-llm", SandboxOnDemand(ZeroLlmStrategy()))
    return strategies


def load_engine(pack_names: Iterable[str]) -> tuple[Engine, list[Issue]]:
    """The built-in checks and the named packs' (PackError on an invalid pack), and the
    warnings of loading them (a built-in replacing a pack check of its id).

    Each pack module is imported in a sandbox (packs.describe_pack), not here; only on a
    host that cannot build one is it imported in this process.
    """
    strategies = deployment_strategies()
    registry = default_registry()
    names = list(pack_names)
    if not names:  # no pack: nothing of the sandbox is imported
        return Engine(registry, strategies), []
    from guardrails.engine.sandbox.process import describe_on_this_host

    warnings = load_packs(names, registry, strategies, describe=describe_on_this_host)
    return Engine(registry, strategies), warnings


def handler_environ(
    environ: Mapping[str, str],
    secret_names: Iterable[str],
    pack_env: Iterable[str] = (),
    console_names: Iterable[str] = (),
) -> dict[str, str]:
    """The environment a check may be given: only what the operator lists for checks.

    `pack_env` (KINDGI_PACK_ENV) names plain variables, `secret_names` (KINDGI_SECRETS) the
    secrets; a name the console itself uses (`is_console_name`, or one of `console_names`:
    the judge models' key variables) is never included, whichever list names it.
    """
    names = {*secret_names, *pack_env} - set(console_names)
    return {name: environ[name] for name in sorted(names) if name in environ and not is_console_name(name)}


def registration_policy(
    *,
    production: bool,
    environ: Mapping[str, str],
    secret_names: Iterable[str],
    capabilities: Iterable[str],
    bindings: Iterable[str],
    artifact_dirs: Iterable[str] | None = None,
) -> RegistrationPolicy:
    """What a guardrail's needsSpec may ask for here; filesystem artifacts refused in production.

    `environ` is the handler environment (handler_environ): a declared secret must be one of
    `secret_names` and set; a declared env variable must be set and not a secret.
    """
    secrets = frozenset(name for name in secret_names if name in environ)
    return RegistrationPolicy(
        production=production,
        artifact_dirs=None if artifact_dirs is None else tuple(artifact_dirs),
        available_env=frozenset(environ) - secrets,
        available_secrets=secrets,
        capabilities=frozenset(capabilities),
        bindings=frozenset(bindings),
    )


def needs_sandbox(guardrails: Iterable[Guardrail], registry: CheckRegistry) -> bool:
    """Whether any of the guardrails runs its check in the sandbox (so a pool is needed)."""
    for guardrail in guardrails:
        if guardrail.document.get("sandbox") in _IN_PROCESS:
            continue
        check = registry.get(guardrail.check)
        if check is not None and not check.builtin and guardrail.kind == "zero-llm":
            return True
    return False
