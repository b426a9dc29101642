"""The console's side of guardrails: its check registry and engine, saving with revisions.

Views, commands and tasks call these functions; the engine itself stays free of Django.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from guardrails.engine.evaluate import Engine
from guardrails.engine.registration import Registration, RegistrationPolicy, define_guardrail
from guardrails.engine.registry import CheckRegistry, default_registry
from guardrails.engine.strategies import StrategyRegistry, default_strategies
from guardrails.engine.types import Check
from guardrails.engine.types import Guardrail as EngineGuardrail
from guardrails.models import Guardrail, GuardrailRevision


@lru_cache(maxsize=1)
def console_checks() -> CheckRegistry:
    """The built-in checks and those of the packs named in KINDGI_CHECK_PACKS.

    A pack is a module that defines checks at module level with `define_check`.
    """
    registry = default_registry()
    for module_name in settings.KINDGI_CHECK_PACKS:
        module = importlib.import_module(module_name)
        for value in vars(module).values():
            if isinstance(value, Check):
                registry.register(value, replace=True)
    return registry


@lru_cache(maxsize=1)
def console_strategies() -> StrategyRegistry:
    return default_strategies()


@lru_cache(maxsize=1)
def console_engine() -> Engine:
    """The engine every server path evaluates with."""
    return Engine(console_checks(), console_strategies())


def registration_policy() -> RegistrationPolicy:
    return RegistrationPolicy(production=settings.KINDGI_PRODUCTION)


def register_document(document: object) -> Registration:
    """Schema validation and registration of a wire document, saving nothing."""
    return define_guardrail(
        document,
        registry=console_checks(),
        strategies=console_strategies(),
        policy=registration_policy(),
    )


@dataclass(frozen=True)
class Author:
    """Who saves a revision: a user, or an API key named by its label."""

    user: Any
    label: str


@transaction.atomic
def save_guardrail(document: dict[str, Any], author: Author, *, enabled: bool | None = None) -> Guardrail:
    """Create or replace the guardrail of `document["id"]` and record the new revision.

    The document must have been registered (`register_document`) first. A deleted guardrail
    with that id comes back, its history continued.
    """
    guardrail = (
        Guardrail.objects.select_for_update().filter(guardrail_id=document["id"]).first()
        or Guardrail(guardrail_id=document["id"])
    )
    now = timezone.now()
    guardrail.document = document
    guardrail.copy_columns()
    guardrail.revision += 1
    guardrail.updated_at = now
    guardrail.deleted_at = None
    if enabled is not None:
        guardrail.enabled = enabled
    guardrail.save()
    GuardrailRevision.objects.create(
        guardrail=guardrail,
        number=guardrail.revision,
        document=document,
        created_by=author.user,
        created_by_label=author.label,
        created_at=now,
    )
    return guardrail


def delete_guardrail(guardrail: Guardrail) -> None:
    """Soft delete: the guardrail stops applying, its revisions stay for the history."""
    guardrail.deleted_at = timezone.now()
    guardrail.save(update_fields=["deleted_at"])


@dataclass(frozen=True)
class Enforced:
    """An enabled guardrail as the engine reads it, with the revision row results name."""

    guardrail: EngineGuardrail
    revision: GuardrailRevision


def enforced_guardrails() -> list[Enforced]:
    """Every enabled guardrail at its current revision, in one query."""
    from django.db.models import F

    revisions = (
        GuardrailRevision.objects.filter(
            guardrail__enabled=True,
            guardrail__deleted_at__isnull=True,
            number=F("guardrail__revision"),
        )
        .select_related("guardrail")
        .order_by("guardrail__guardrail_id")
    )
    return [
        Enforced(EngineGuardrail(document=rev.document, revision=rev.number), rev)
        for rev in revisions
    ]
