"""The deployment the CI commands evaluate with, read from the environment as the console's
settings are: packs, the registration policy, limits, the sandbox pool and judge models."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from guardrails.engine import deployment as recipe
from guardrails.engine import environment
from guardrails.engine.cli.files import BadInput, load_json_file
from guardrails.engine.cli.writer import Writer
from guardrails.engine.evaluate import Engine
from guardrails.engine.packs import PackError
from guardrails.engine.registration import RegistrationPolicy
from guardrails.engine.types import Issue

if TYPE_CHECKING:  # the judge's services load only for a run given --judge-models
    from guardrails.engine.judge import InMemoryJudgeServices


# The variables the engine declares (guardrails/engine/environment.py), which the settings
# read too: the same defaults and limits, a bad value a usage error naming it.
def _env_list(name: str) -> list[str]:
    return environment.ENGINE.items(name)


def _env_bool(name: str, default: bool | None = None) -> bool:
    try:
        return environment.ENGINE.flag(name, default)
    except environment.BadValue as error:
        raise BadInput(str(error)) from None


def _env_whole_number(name: str) -> int:
    try:
        return environment.ENGINE.whole(name)
    except environment.BadValue as error:
        raise BadInput(str(error)) from None


@dataclass
class Deployment:
    """The console's engine and registration policy, as the environment configures them."""

    engine: Engine
    policy: RegistrationPolicy
    warnings: list[Issue]


def load_deployment(extra_packs: Sequence[str] = ()) -> Deployment:
    """The built-in checks, the packs of KINDGI_CHECK_PACKS and `extra_packs`, the sandboxed
    strategies and the console's registration policy; BadInput for an invalid pack."""
    packs = list(dict.fromkeys([*_env_list("KINDGI_CHECK_PACKS"), *extra_packs]))
    try:
        engine, warnings = recipe.load_engine(packs)
    except PackError as exc:
        raise BadInput(f"check packs: {exc}") from exc
    production = _env_bool("KINDGI_PRODUCTION", not _env_bool("DJANGO_DEBUG"))
    policy = recipe.registration_policy(
        production=production,
        environ=_handler_environ(),
        secret_names=_env_list("KINDGI_SECRETS"),
        capabilities=_env_list("KINDGI_CAPABILITIES"),
        bindings=_env_list("KINDGI_BINDINGS"),
    )
    return Deployment(engine, policy, warnings)


def _handler_environ() -> dict[str, str]:
    return recipe.handler_environ(os.environ, _env_list("KINDGI_SECRETS"), _env_list("KINDGI_PACK_ENV"))


def sandbox_pool() -> Any:
    """A pool of sandbox workers with the console's limits (imported only when needed)."""
    from guardrails.engine.sandbox import SandboxDefaults, SandboxPool

    defaults = SandboxDefaults(
        mem_mb=_env_whole_number("KINDGI_SANDBOX_MEM_MB"),
        cpu_ms=_env_whole_number("KINDGI_SANDBOX_CPU_MS"),
        pool_size=_env_whole_number("KINDGI_SANDBOX_POOL_SIZE"),
    )
    return SandboxPool(defaults, environ=_handler_environ())


def write_pack_warnings(deployment: Deployment, stderr: Writer) -> None:
    for issue in deployment.warnings:
        stderr.write(f"warning: check packs: {issue.message}\n")


def trace_limits() -> tuple[int, int]:
    """The trace size and depth limits: the console's settings, read from the environment."""
    return _env_whole_number("KINDGI_MAX_TRACE_BYTES"), _env_whole_number("KINDGI_MAX_DEPTH")


def judge_services(path: str | None) -> InMemoryJudgeServices | None:
    """Judge services over the registrations in `path` (a JSON array); None without a file.

    The file is the console's `GET /api/v1/judge-models` answer as it is (a disabled
    registration is never routed to, as in production), or the same array written by hand.
    Each registration is checked like the console checks one; the keys come from the
    environment variables the registrations name, at call time. A judge call may take
    KINDGI_JUDGE_CALL_LIMIT_S seconds (default 60), retries included.
    """
    if not path:
        return None
    import httpx  # imported here: only a run with llm-judge guardrails pays for it

    from guardrails.engine.judge import InMemoryJudgeServices, InvalidJudgeModel, judge_models_of_export

    try:
        models = judge_models_of_export(load_json_file(path))
    except InvalidJudgeModel as error:
        raise BadInput("\n".join(f"{path}: {issue.path or '/'}: {issue.message}" for issue in error.issues)) from None
    return InMemoryJudgeServices(
        models=models, client=httpx.Client(), time_limit_s=float(_env_whole_number("KINDGI_JUDGE_CALL_LIMIT_S"))
    )


def judge_summary(judge: InMemoryJudgeServices) -> str:
    """One line on stderr: what the run's judge calls cost (the reports stay as they are)."""
    from decimal import Decimal  # (only a run with llm-judge guardrails sums costs)

    calls = [call for call, _guardrail, _revision in judge.calls]
    cost = sum((call.cost_usd for call in calls), Decimal(0))
    billed = sum(1 for call in calls if call.billed)
    return f"judge: {len(calls)} calls ({billed} billed), {cost} USD\n"
