"""The console's engine, sandbox pool and registration policy, from settings.

Built once per process from the recipe the CI command shares (guardrails.engine.deployment).
Packs load at start-up (`load_at_start_up`, called by GuardrailsConfig.ready): an invalid
pack stops start-up with ImproperlyConfigured naming the pack and the check; a built-in
replacing a pack check is logged and shown by `manage.py check`.

Every server path that evaluates (POST evaluate, ingestion, batch runs) takes its engine
from `engine()`; their Context services come from traces.judge.services.evaluation_services().
"""

from __future__ import annotations

import atexit
import logging
import os
from collections.abc import Iterable, Mapping
from functools import cache
from typing import Any

from django.conf import settings
from django.core.checks import CheckMessage
from django.core.checks import Info as CheckInfo
from django.core.checks import Warning as CheckWarning
from django.core.exceptions import ImproperlyConfigured
from django.core.signals import setting_changed
from django.dispatch import receiver

from guardrails.engine import deployment as recipe
from guardrails.engine.evaluate import Engine
from guardrails.engine.packs import PackError, resolve_filesystem_artifact
from guardrails.engine.registration import RegistrationPolicy, artifact_outside_dirs
from guardrails.engine.registry import CheckRegistry
from guardrails.engine.sandbox import SandboxDefaults, SandboxPool, host_postures
from guardrails.engine.strategies import StrategyRegistry
from guardrails.engine.types import Check, Guardrail, Issue

logger = logging.getLogger("guardrails.packs")


def handler_environ() -> dict[str, str]:
    """The environment a check may be given: what KINDGI_PACK_ENV and KINDGI_SECRETS name,
    never a variable holding a registered judge model's API key."""
    from guardrails.redaction import judge_key_names

    return recipe.handler_environ(os.environ, settings.KINDGI_SECRETS, settings.KINDGI_PACK_ENV, judge_key_names())


def registration_policy() -> RegistrationPolicy:
    """What a guardrail's needsSpec may ask for here; filesystem artifacts in production."""
    return recipe.registration_policy(
        production=settings.KINDGI_PRODUCTION,
        environ=handler_environ(),
        secret_names=settings.KINDGI_SECRETS,
        capabilities=settings.KINDGI_CAPABILITIES,
        bindings=settings.KINDGI_BINDINGS,
        artifact_dirs=settings.KINDGI_PACK_DIRS,
    )


def sandbox_defaults() -> SandboxDefaults:
    return SandboxDefaults(
        mem_mb=settings.KINDGI_SANDBOX_MEM_MB,
        cpu_ms=settings.KINDGI_SANDBOX_CPU_MS,
        pool_size=settings.KINDGI_SANDBOX_POOL_SIZE,
    )


@cache
def sandbox_pool() -> SandboxPool:
    """The process's pool of warm sandbox workers, shut down when the process exits.

    Workers start on a sandboxed guardrail's first evaluation, not here: a Celery worker
    forks before it evaluates anything, so no worker process is shared across a fork.
    """
    pool = SandboxPool(sandbox_defaults(), environ=handler_environ())
    atexit.register(pool.shutdown)
    return pool


@cache
def _loaded() -> tuple[Engine, tuple[Issue, ...]]:
    from guardrails.redaction import redact_secrets

    engine, warnings = recipe.load_engine(settings.KINDGI_CHECK_PACKS)
    engine.redact = redact_secrets  # no configured secret leaves the engine in an error
    return engine, tuple(warnings)


@receiver(setting_changed)
def _reload_packs(*, setting: str, **kwargs: Any) -> None:
    """Tests that override KINDGI_CHECK_PACKS get an engine built from the new packs."""
    if setting == "KINDGI_CHECK_PACKS":
        _loaded.cache_clear()


def engine() -> Engine:
    """The engine every server path evaluates with."""
    return _loaded()[0]


def check_registry() -> CheckRegistry:
    """The built-in checks and the checks of the packs named in KINDGI_CHECK_PACKS."""
    return engine().registry


def strategies() -> StrategyRegistry:
    return engine().strategies


def pack_warnings() -> list[Issue]:
    """Warnings from loading the packs (a built-in replacing a pack check of its id)."""
    return list(_loaded()[1])


def load_at_start_up() -> None:
    """Load the packs once; ImproperlyConfigured (naming pack and check) stops start-up."""
    try:
        warnings = pack_warnings()
    except PackError as error:
        raise ImproperlyConfigured(f"KINDGI_CHECK_PACKS: {error}") from error
    for warning in warnings:
        logger.warning("KINDGI_CHECK_PACKS: %s", warning.message)


def pack_system_checks(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """`manage.py check`: each pack loading warning (a built-in replacing a pack check)."""
    return [
        CheckWarning(
            warning.message,
            hint="Rename the pack's check, or drop it: guardrails naming this id get the built-in.",
            obj=warning.path,
            id="guardrails.W001",
        )
        for warning in pack_warnings()
    ]


def sandbox_postures() -> list[dict[str, Any]]:
    """Which sandbox postures this host enforces (the guardrails page, `check --deploy`)."""
    return [{"posture": posture, "enforced": enforced, "how": how} for posture, enforced, how in host_postures()]


def sandbox_system_checks(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """`manage.py check --deploy`: each sandboxed posture, enforced here or not and why."""
    messages: list[CheckMessage] = []
    for row in sandbox_postures():
        if row["posture"] == "none":
            continue
        text = f"sandbox posture {row['posture']}: {row['how']}"
        if row["enforced"]:
            messages.append(CheckInfo(text, id="guardrails.I002"))
        else:
            messages.append(
                CheckWarning(
                    text,
                    hint="Install bubblewrap (and python3-seccomp) and allow user namespaces; "
                    "until then guardrails of this posture answer error.",
                    id="guardrails.W002",
                )
            )
    return messages


def listed_checks() -> list[Check]:
    """Every check of the registry by id: `GET checks` and the pages list these."""
    return sorted(check_registry(), key=lambda check: check.id)


def load_filesystem_checks(guardrails: Iterable[Guardrail]) -> None:
    """Outside production, load the `filesystem` checks of stored guardrails that this
    process has not loaded yet (a worker started after the guardrail was saved)."""
    if settings.KINDGI_PRODUCTION:
        return
    registry = check_registry()
    for guardrail in guardrails:
        artifact = guardrail.document.get("codeArtifactRef")
        if not isinstance(artifact, Mapping) or artifact.get("kind") != "filesystem":
            continue
        if artifact_outside_dirs(guardrail.document, tuple(settings.KINDGI_PACK_DIRS)):
            continue  # saved before the folder was unlisted: it no longer loads
        loaded = registry.get(guardrail.check)
        if loaded is None or (not loaded.builtin and loaded.module != artifact.get("modulePath")):
            resolve_filesystem_artifact(guardrail.document, registry)
