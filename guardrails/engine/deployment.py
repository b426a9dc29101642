"""What a deployment evaluates with, built from plain values: one recipe for two callers.

The console (guardrails.deployment, from Django settings) and the CI command (cli.py, from
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
from guardrails.engine.sandbox.posture import SANDBOXED_LEVELS
from guardrails.engine.sandbox.strategy import SandboxedZeroLlmStrategy
from guardrails.engine.strategies import StrategyRegistry, ZeroLlmStrategy, default_strategies
from guardrails.engine.types import Guardrail, Issue

#: The console's own configuration: never handed to a check, whatever its needsSpec says
#: (unless a name is listed as a secret for checks).
CONSOLE_PREFIXES = ("DJANGO_", "KINDGI_", "CELERY_", "DATABASE_", "REDIS_")


def deployment_strategies() -> StrategyRegistry:
    """The built-in strategies, zero-llm running pack checks of sandboxed guardrails in the pool."""
    strategies = default_strategies()
    strategies.register("zero-llm", SandboxedZeroLlmStrategy(ZeroLlmStrategy()))
    return strategies


def load_engine(pack_names: Iterable[str]) -> tuple[Engine, list[Issue]]:
    """The built-in checks and the named packs' (PackError on an invalid pack), and the
    warnings of loading them (a built-in replacing a pack check of its id)."""
    strategies = deployment_strategies()
    registry = default_registry()
    warnings = load_packs(pack_names, registry, strategies)
    return Engine(registry, strategies), warnings


def handler_environ(environ: Mapping[str, str], secret_names: Iterable[str]) -> dict[str, str]:
    """The environment a check may be given: all but the console's own configuration."""
    secrets = set(secret_names)
    return {
        name: value
        for name, value in environ.items()
        if name in secrets or not name.startswith(CONSOLE_PREFIXES)
    }


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
        if str(guardrail.document.get("sandbox") or "none") not in SANDBOXED_LEVELS:
            continue
        check = registry.get(guardrail.check)
        if check is not None and not check.builtin and guardrail.kind == "zero-llm":
            return True
    return False
