"""The console's side of guardrails: registering and saving with revisions, what is enforced.

Views, commands and tasks call these functions; the engine itself stays free of Django.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

from django.db import transaction
from django.utils import timezone

from guardrails import deployment
from guardrails.engine.registration import Registration, define_guardrail
from guardrails.engine.types import Guardrail as EngineGuardrail
from guardrails.models import Guardrail, GuardrailRevision
from kindgi_console.audit import log as audit


def register_document(document: object) -> Registration:
    """Schema validation and registration of a wire document, saving nothing.

    Every server path that registers a guardrail (API create, update and validate, import,
    the pages) calls this: the deployment's checks and policy, so that production refuses
    `filesystem` code artifacts everywhere.
    """
    return define_guardrail(
        document,
        registry=deployment.check_registry(),
        strategies=deployment.strategies(),
        policy=deployment.registration_policy(),
    )


@dataclass(frozen=True)
class Author:
    """Who saves a revision: a user, or an API key named by its label."""

    user: Any
    label: str


@transaction.atomic
def save_guardrail(
    document: dict[str, Any], author: Author, *, enabled: bool | None = None, audit_verb: str | None = None
) -> Guardrail:
    """Create or replace the guardrail of `document["id"]` and record the new revision.

    The document must have been registered (`register_document`) first. A deleted guardrail
    with that id comes back, its history continued. `audit_verb` names the change in the
    audit log when it is not a plain create or update (`import`).
    """
    guardrail = (
        Guardrail.objects.select_for_update().filter(guardrail_id=document["id"]).first()
        or Guardrail(guardrail_id=document["id"])
    )
    before = audited_state(guardrail) if guardrail.pk and guardrail.deleted_at is None else None
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
    verb = audit_verb or ("update" if before else "create")
    audit.record(f"guardrail.{verb}", guardrail, before=before, after=audited_state(guardrail), actor=author)
    return guardrail


def audited_state(guardrail: Guardrail) -> dict[str, Any]:
    """What the audit log compares: the wire document's fields and the console's switch."""
    return {**guardrail.document, "enabled": guardrail.enabled}


@transaction.atomic
def delete_guardrail(guardrail: Guardrail) -> None:
    """Soft delete: the guardrail stops applying, its revisions stay for the history."""
    guardrail.deleted_at = timezone.now()
    guardrail.save(update_fields=["deleted_at"])
    audit.record("guardrail.delete", guardrail, before=audited_state(guardrail))


@transaction.atomic
def set_enabled(guardrail: Guardrail, enabled: bool) -> None:
    """Turn a guardrail on or off (not a new revision: the document is unchanged)."""
    before = guardrail.enabled
    guardrail.enabled = enabled
    guardrail.save(update_fields=["enabled"])
    audit.record("guardrail.toggle", guardrail, before={"enabled": before}, after={"enabled": enabled})


@dataclass(frozen=True)
class Enforced:
    """An enabled guardrail as the engine reads it, with the revision row results name."""

    guardrail: EngineGuardrail
    revision: GuardrailRevision

    @property
    def shadow(self) -> bool:
        """In shadow: recorded, never halting, never a violation (the guardrail row's state)."""
        return bool(self.revision.guardrail.shadow)

    def sampled(self, trace_id: object) -> bool:
        """Whether a shadow guardrail judges this trace: a stable share of trace ids, so that
        a retry of the same trace is judged (or not) again."""
        rate = self.revision.guardrail.shadow_sample_rate
        if not self.shadow or rate is None or rate >= 1:
            return True
        digest = hashlib.sha256(f"{self.guardrail.id}:{trace_id}".encode()).digest()
        return int.from_bytes(digest[:8], "big") / 2**64 < rate


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
    enforced = [Enforced(engine_guardrail(rev), rev) for rev in revisions]
    deployment.load_filesystem_checks(item.guardrail for item in enforced)
    return enforced


_ENGINE_GUARDRAILS: dict[int, EngineGuardrail] = {}


def engine_guardrail(revision: GuardrailRevision) -> EngineGuardrail:
    """The engine's guardrail of a revision, kept for the process: every evaluation of the
    revision then reuses its compiled check (regular expressions, folded values), which the
    engine keeps per guardrail document. A revision does not change; the document is still
    compared, so that a key reused by another database (tests) is never mistaken."""
    found = _ENGINE_GUARDRAILS.get(revision.pk)
    if found is None or found.revision != revision.number or found.document != revision.document:
        if len(_ENGINE_GUARDRAILS) >= 4096:
            _ENGINE_GUARDRAILS.clear()
        found = _ENGINE_GUARDRAILS[revision.pk] = EngineGuardrail(document=revision.document, revision=revision.number)
    return found
