"""The deployment's checks, strategies, sandbox pool and registration policy, from settings.

Built once per process. Packs load here at start-up: an invalid pack raises PackError,
which stops start-up with a message naming the pack and the check.
"""

from __future__ import annotations

import atexit
import os
from functools import cache
from typing import Any

from django.conf import settings

from guardrails.engine.evaluate import Engine
from guardrails.engine.packs import load_packs
from guardrails.engine.registration import RegistrationPolicy
from guardrails.engine.registry import CheckRegistry, default_registry
from guardrails.engine.sandbox import SandboxDefaults, SandboxPool
from guardrails.engine.sandbox.strategy import SandboxedZeroLlmStrategy
from guardrails.engine.strategies import StrategyRegistry, ZeroLlmStrategy, default_strategies
from guardrails.engine.types import Issue

#: The console's own configuration: never handed to a check, whatever its needsSpec says.
_CONSOLE_PREFIXES = ("DJANGO_", "KINDGI_", "CELERY_", "DATABASE_", "REDIS_")


def handler_environ() -> dict[str, str]:
    """The environment a check may be given: all but the console's own configuration."""
    secrets = set(settings.KINDGI_SECRETS)
    return {
        name: value
        for name, value in os.environ.items()
        if name in secrets or not name.startswith(_CONSOLE_PREFIXES)
    }


def registration_policy() -> RegistrationPolicy:
    """What a guardrail's needsSpec may ask for here; filesystem artifacts in production."""
    environ = handler_environ()
    secrets = frozenset(name for name in settings.KINDGI_SECRETS if name in environ)
    return RegistrationPolicy(
        production=settings.KINDGI_PRODUCTION,
        available_env=frozenset(environ) - secrets,
        available_secrets=secrets,
        capabilities=frozenset(settings.KINDGI_CAPABILITIES),
        bindings=frozenset(settings.KINDGI_BINDINGS),
    )


def sandbox_defaults() -> SandboxDefaults:
    return SandboxDefaults(
        mem_mb=settings.KINDGI_SANDBOX_MEM_MB,
        cpu_ms=settings.KINDGI_SANDBOX_CPU_MS,
        pool_size=settings.KINDGI_SANDBOX_POOL_SIZE,
    )


@cache
def sandbox_pool() -> SandboxPool:
    """The process's pool of warm sandbox workers, shut down when the process exits."""
    pool = SandboxPool(sandbox_defaults(), environ=handler_environ())
    atexit.register(pool.shutdown)
    return pool


@cache
def strategies() -> StrategyRegistry:
    registry = default_strategies()
    registry.register("zero-llm", SandboxedZeroLlmStrategy(ZeroLlmStrategy()))
    return registry


@cache
def _loaded_registry() -> tuple[CheckRegistry, tuple[Issue, ...]]:
    registry = default_registry()
    warnings = load_packs(settings.KINDGI_CHECK_PACKS, registry, strategies())
    return registry, tuple(warnings)


def check_registry() -> CheckRegistry:
    """The built-in checks and the checks of the packs named in KINDGI_CHECK_PACKS."""
    return _loaded_registry()[0]


def pack_warnings() -> list[Issue]:
    """Warnings from loading the packs (a built-in replacing a pack check of its id)."""
    return list(_loaded_registry()[1])


def engine() -> Engine:
    return Engine(check_registry(), strategies())


def evaluation_services(tenant: Any = None, *, evaluation: Any = None) -> dict[str, Any]:
    """The services of one evaluation's Context (THE place they are built): the judge's
    registered models, cache and cost ledger for `tenant` (or each trace's own), charging
    `evaluation` when it is a batch run. Close them with `close_services` when done."""
    from guardrails.judge import console_judge_services

    return {"judge": console_judge_services(tenant, evaluation=evaluation)}


def close_services(services: dict[str, Any]) -> None:
    """Release what evaluation_services opened (the judge's HTTP connections)."""
    judge = services.get("judge")
    if judge is not None and callable(getattr(judge, "close", None)):
        judge.close()
