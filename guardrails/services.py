"""The console's side of guardrails: registering and saving with revisions, what is enforced.

Views, commands and tasks call these functions; the engine itself stays free of Django.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from django.contrib.auth.models import User
from django.db import transaction
from django.db.models import F, Q
from django.utils import timezone

from guardrails import deployment
from guardrails.engine.registration import Registration, define_guardrail
from guardrails.engine.schema import validate_console_limits
from guardrails.engine.stages import DEFAULT_STAGES, ordered
from guardrails.engine.types import Guardrail as EngineGuardrail
from guardrails.engine.types import Issue, IssuesError
from guardrails.models import Guardrail, GuardrailRevision
from kindgi_console.audit import log as audit
from kindgi_console.tenancy.models import ApiKey, Membership, Tenant
from kindgi_console.tenancy.scoping import Caller

#: Ids that are the name of another route under guardrails/: the API's `validate`, `export`,
#: `try` and `preview`, the pages' `new` and `import`. A guardrail with one could be saved
#: but not read, replaced or deleted at its own URL (the other route answers, 405 or its
#: own page), so the console refuses them at /id. They are valid in the wire contract:
#: validate_guardrail and guardrail_ci take them. tests/guardrails/test_route_ids.py
#: checks this set against the URLconf.
ROUTE_IDS = frozenset({"validate", "export", "try", "preview", "new", "import"})


def route_id_issues(document: object) -> list[Issue]:
    """The console's refusal of an id that is the name of another route under guardrails/."""
    guardrail_id = document.get("id") if isinstance(document, dict) else None
    if not isinstance(guardrail_id, str) or guardrail_id not in ROUTE_IDS:
        return []
    return [
        Issue(
            "/id",
            f"{guardrail_id!r} is the name of another route under guardrails/ "
            f"({', '.join(sorted(ROUTE_IDS))}): the console could not address the guardrail at its "
            "own URL; choose another id",
        )
    ]


def register_document(document: object) -> Registration:
    """Schema validation and registration of a wire document, saving nothing.

    Every server path that registers a guardrail (API create, update and validate, import,
    the pages) calls this: the deployment's checks and policy, so that production refuses
    `filesystem` code artifacts everywhere, and the console's limits (lengths its columns
    hold, the id alphabet), each error with the pointer of its field.
    """
    registration = define_guardrail(
        document,
        registry=deployment.check_registry(),
        strategies=deployment.strategies(),
        policy=deployment.registration_policy(),
    )
    limits = validate_console_limits(document) if isinstance(document, dict) else []
    limits += route_id_issues(document)
    if limits:
        known = set(registration.errors)
        registration.errors += [issue for issue in limits if issue not in known]
        registration.guardrail = None
    return registration


@dataclass(frozen=True)
class Author:
    """Who saves a revision: a user, or an API key named by its label."""

    user: Any
    label: str


class OwnershipError(IssuesError):
    """A save that would change what another owner enforces: carries the issues and status."""


class RevisionConflict(Exception):
    """A save based on a revision that is no longer the guardrail's current one: someone
    saved meanwhile. `current` is the guardrail as it is now (its row locked until the
    transaction ends), `based_on` the revisions the save was based on."""

    def __init__(self, current: Guardrail, based_on: frozenset[int]) -> None:
        super().__init__(f"guardrail {current.guardrail_id!r} is at revision {current.revision}")
        self.current = current
        self.based_on = based_on


def ownership_issues(document: dict[str, Any], owner: Tenant | None) -> list[Issue]:
    """A tenant's guardrail may name no other tenant in `scope.tenants`."""
    scope = document.get("scope")
    tenants = scope.get("tenants") if isinstance(scope, dict) else None
    if owner is None or not isinstance(tenants, list):
        return []
    return [
        Issue(
            f"/scope/tenants/{index}",
            f"a guardrail of tenant {owner.slug!r} selects only "
            f"its traces: scope.tenants may name {owner.slug!r} and no other tenant",
        )
        for index, slug in enumerate(tenants)
        if slug != owner.slug
    ]


def unavailable_id(guardrail_id: str) -> Issue:
    """The one refusal of an id held by a guardrail the caller does not see: another tenant's
    (live or deleted) or a deleted console-wide one. The same words whichever it is, naming
    no owner and not saying whether it is live, so that no tenant learns of another's."""
    return Issue(
        "/id",
        f"the id {guardrail_id!r} cannot be given to a new guardrail here: choose another "
        "(guardrail ids are one namespace for the whole console; a prefix of your own, such as "
        "your tenant's name, keeps them apart)",
    )


def check_owner(guardrail_id: str, owner: Tenant | None) -> None:
    """Refuse an id that a guardrail of another owner holds (live or deleted: its history
    is that owner's), with `unavailable_id`'s answer, which says nothing of that guardrail."""
    rows = Guardrail.objects.filter(guardrail_id=guardrail_id)
    others = rows.filter(tenant__isnull=False) if owner is None else rows.exclude(tenant=owner)
    if others.exists():
        raise OwnershipError([unavailable_id(guardrail_id)], 409)


@transaction.atomic
def save_guardrail(
    document: dict[str, Any],
    author: Author,
    *,
    enabled: bool | None = None,
    audit_verb: str | None = None,
    owner: Tenant | None = None,
    based_on: frozenset[int] | None = None,
    shadow: bool | None = None,
) -> Guardrail:
    """Create or replace the guardrail of `document["id"]` and record the new revision.

    The document must have been registered (`register_document`) first. A new guardrail
    belongs to `owner` (None: the whole console); a replaced one keeps its owner. A deleted
    guardrail with that id comes back, its history continued. Raises OwnershipError when
    `scope.tenants` names a tenant other than the owner. `audit_verb` names the change in
    the audit log when it is not a plain create or update (`import`).

    `based_on` (a request's `If-Match`, an editor's base revision): the revisions the
    change was made on; when the live guardrail's current revision is not one of them,
    nothing is saved and RevisionConflict is raised. The row is locked before it is
    compared, so that of two saves based on the same revision exactly one is applied.

    `shadow` (the editor's "save in shadow"): True saves the new revision in shadow,
    evaluated and recorded but never halting nor a violation; the revision enforced until
    now stays enforced beside it until the new one is promoted (`promote`). False enforces
    the new revision at once; None (the default) keeps the guardrail's state: a guardrail
    in shadow stays in shadow.
    """
    guardrail = Guardrail.objects.select_for_update().filter(guardrail_id=document["id"]).first() or Guardrail(
        guardrail_id=document["id"], tenant=owner
    )
    if based_on is not None and (
        guardrail.pk is None or guardrail.deleted_at is not None or guardrail.revision not in based_on
    ):
        raise RevisionConflict(guardrail, based_on)
    issues = ownership_issues(document, guardrail.tenant)
    if issues:
        raise OwnershipError(issues)
    before = audited_state(guardrail) if guardrail.pk and guardrail.deleted_at is None else None
    was = shadow_state(guardrail) if before else None
    if shadow is not None or before is None:
        _shadow_on_save(guardrail, bool(shadow), enforced_until_now=guardrail.revision if before else None)
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
    if shadow_state(guardrail) != (was or shadow_state(Guardrail())):
        audit.record(_shadow_verb(was, guardrail), guardrail, before=was, after=shadow_state(guardrail), actor=author)
    return guardrail


def _shadow_on_save(guardrail: Guardrail, shadow: bool, enforced_until_now: int | None) -> None:
    """The shadow state a save leaves: in shadow, the revision enforced until now (if any,
    and not itself in shadow) stays enforced beside the new one; enforced, nothing beside."""
    if not shadow:
        guardrail.shadow, guardrail.enforced_revision = False, None
        return
    if not guardrail.shadow:
        guardrail.enforced_revision = enforced_until_now
    guardrail.shadow = True


def shadow_state(guardrail: Guardrail) -> dict[str, Any]:
    """What the audit log records of a guardrail's shadow state."""
    return {
        "shadow": guardrail.shadow,
        "sampleRate": guardrail.shadow_sample_rate,
        "enforcedRevision": guardrail.enforced_revision if guardrail.shadow else None,
    }


def _shadow_verb(before: dict[str, Any] | None, guardrail: Guardrail) -> str:
    return "guardrail.promote" if before and before["shadow"] and not guardrail.shadow else "guardrail.shadow"


def owner_slug(guardrail: Guardrail) -> str | None:
    """The owner tenant's slug, None for a console-wide guardrail."""
    return guardrail.tenant.slug if guardrail.tenant is not None else None


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
    """Turn a guardrail on or off (not a new revision: the document is unchanged); audited
    as `guardrail.toggle`, and a switch to the state it is in writes nothing."""
    before = guardrail.enabled
    if before == enabled:
        return
    guardrail.enabled = enabled
    guardrail.save(update_fields=["enabled"])
    audit.record("guardrail.toggle", guardrail, before={"enabled": before}, after={"enabled": enabled})


@transaction.atomic
def set_shadow(guardrail: Guardrail, shadow: bool, rate: float | None) -> None:
    """Put a guardrail in shadow (evaluated on a share `rate` of traces, None: all) or
    promote its current revision to enforced: the console's state beside the document, no
    new revision. Putting an enforced guardrail in shadow enforces nothing beside it (a
    guardrail in shadow beside an enforced revision keeps that one, with the new rate);
    promoting stops enforcing the revision beside it. Audited as `guardrail.shadow` or
    `guardrail.promote`; a request that changes nothing writes nothing."""
    locked = Guardrail.objects.select_for_update().get(pk=guardrail.pk)
    before = shadow_state(locked)
    enforced = locked.enforced_revision if shadow and locked.shadow else None
    guardrail.shadow, guardrail.shadow_sample_rate, guardrail.enforced_revision = shadow, rate, enforced
    after = shadow_state(guardrail)
    if before == after:
        return
    guardrail.save(update_fields=["shadow", "shadow_sample_rate", "enforced_revision"])
    audit.record(_shadow_verb(before, guardrail), guardrail, before=before, after=after)


def promote(guardrail: Guardrail) -> None:
    """Enforce a guardrail's shadow revision: it halts and makes violations from now on, and
    the revision enforced beside it stops. Audited as `guardrail.promote`."""
    set_shadow(guardrail, False, None)


def set_fail_mode(guardrail: Guardrail, on_error: str) -> None:
    """What an `error` of the guardrail does to a turn at runtime: `pass` or `halt` (the
    caller checked that a `halt` guardrail asks it). Console state beside the document, as
    shadow is: no new revision; audited as `guardrail.fail-mode`."""
    with transaction.atomic():
        locked = Guardrail.objects.select_for_update().get(pk=guardrail.pk)
        before = locked.on_error
        guardrail.on_error = on_error
        if before == on_error:
            return
        guardrail.save(update_fields=["on_error"])
        audit.record("guardrail.fail-mode", guardrail, before={"onError": before}, after={"onError": on_error})


@transaction.atomic
def set_stages(guardrail: Guardrail, stages: list[str] | None) -> None:
    """Set the stages of a turn at which a guardrail applies at runtime (None: its check's
    defaults): console state beside the document, no new revision. Audited as
    `guardrail.stages`; a request that changes nothing writes nothing."""
    locked = Guardrail.objects.select_for_update().get(pk=guardrail.pk)
    before, after = locked.stages, (ordered(stages) if stages is not None else None)
    guardrail.stages = after
    if before == after:
        return
    guardrail.save(update_fields=["stages"])
    audit.record("guardrail.stages", guardrail, before={"stages": before}, after={"stages": after})


def default_stages(check_id: str) -> list[str]:
    """The stages at which a guardrail of this check applies unless its author chose others."""
    check = deployment.check_registry().get(check_id)
    return list(check.stages) if check is not None else list(DEFAULT_STAGES)


def guardrail_stages(guardrail: Guardrail) -> list[str]:
    """The stages at which the guardrail applies at runtime: its own, or its check's defaults."""
    return list(guardrail.stages) if guardrail.stages is not None else default_stages(guardrail.check_name)


@dataclass(frozen=True)
class Enforced:
    """An enabled guardrail as the engine reads it, with the revision row results name.

    `in_shadow`: whether this revision runs in shadow; None reads the guardrail row's state
    (a run's single pinned revision). A guardrail in shadow beside an enforced revision is
    two items: the enforced revision (`in_shadow` False) and the shadow one (True)."""

    guardrail: EngineGuardrail
    revision: GuardrailRevision
    in_shadow: bool | None = None

    @property
    def shadow(self) -> bool:
        """In shadow: recorded, never halting, never a violation."""
        return bool(self.revision.guardrail.shadow) if self.in_shadow is None else self.in_shadow

    @property
    def halts_on_error(self) -> bool:
        """Fails closed: an `error` halts the turn (its fail mode is `halt` and the guardrail
        is still a `halt` one: a document changed since to another action does not)."""
        return self.revision.guardrail.on_error == "halt" and self.guardrail.on_violation == "halt"

    @cached_property
    def stages(self) -> frozenset[str]:
        """The stages of a turn at which it applies at runtime (computed once per enforced set)."""
        return frozenset(guardrail_stages(self.revision.guardrail))

    def sampled(self, trace_id: object) -> bool:
        """Whether a shadow guardrail judges this trace: a stable share of trace ids, so that
        a retry of the same trace is judged (or not) again."""
        rate = self.revision.guardrail.shadow_sample_rate
        if not self.shadow or rate is None or rate >= 1:
            return True
        digest = hashlib.sha256(f"{self.guardrail.id}:{trace_id}".encode()).digest()
        return int.from_bytes(digest[:8], "big") / 2**64 < rate


def enforced_document(document: dict[str, Any], owner: str | None) -> dict[str, Any]:
    """The document as the engine and CI apply it: a tenant's guardrail selects only that
    tenant's traces, so its `scope.tenants` names the tenant (the stored document stays as
    authored)."""
    if owner is None:
        return document
    scope = document.get("scope")
    return {**document, "scope": {**(scope if isinstance(scope, dict) else {}), "tenants": [owner]}}


def enforced_guardrails(tenant: Tenant | object | None = ...) -> list[Enforced]:
    """Every enabled guardrail at its current revision, in one query.

    With `tenant`, only those that apply to it: the console-wide ones and its own (None:
    the console-wide ones only), so that no answer names another tenant's guardrail.
    """
    revisions = (
        GuardrailRevision.objects.filter(guardrail__enabled=True, guardrail__deleted_at__isnull=True)
        .filter(live_revisions())
        .select_related("guardrail__tenant")
        .order_by("guardrail__guardrail_id", "number")
    )
    if tenant is not ...:
        owned = Q(guardrail__tenant=tenant) if isinstance(tenant, Tenant) else Q(pk__in=[])
        revisions = revisions.filter(Q(guardrail__tenant__isnull=True) | owned)
    enforced = [
        Enforced(
            engine_guardrail(rev, enforced_document(rev.document, owner_slug(rev.guardrail))),
            rev,
            in_shadow=rev.guardrail.shadow and rev.number == rev.guardrail.revision,
        )
        for rev in revisions
    ]
    deployment.load_filesystem_checks(item.guardrail for item in enforced)
    return enforced


def live_revisions(prefix: str = "guardrail__") -> Q:
    """The revisions a guardrail evaluates: its current one, and in shadow the one still
    enforced beside it (GuardrailRevision rows; `prefix` leads to the guardrail)."""
    current = Q(number=F(f"{prefix}revision"))
    return current | Q(**{f"{prefix}shadow": True}, number=F(f"{prefix}enforced_revision"))


_ENGINE_GUARDRAILS: dict[int, EngineGuardrail] = {}


def engine_guardrail(revision: GuardrailRevision, document: dict[str, Any] | None = None) -> EngineGuardrail:
    """The engine's guardrail of a revision (as `document` when given: the document as
    enforced, `enforced_document`), kept for the process: every evaluation of the revision
    then reuses its compiled check (regular expressions, folded values), which the engine
    keeps per guardrail document. A revision does not change; the document is still
    compared, so that a key reused by another database (tests) is never mistaken."""
    document = revision.document if document is None else document
    found = _ENGINE_GUARDRAILS.get(revision.pk)
    if found is None or found.revision != revision.number or found.document != document:
        if len(_ENGINE_GUARDRAILS) >= 4096:
            _ENGINE_GUARDRAILS.clear()
        found = _ENGINE_GUARDRAILS[revision.pk] = EngineGuardrail(document=document, revision=revision.number)
    return found


def revision_authors(revisions: Iterable[GuardrailRevision], caller: Caller) -> dict[int, str]:
    """Who saved each revision, as the caller may see it: an API key or a person of a
    tenant the caller does not read is not named (`createdBy` would leak it)."""
    rows = list(revisions)
    condition = caller.tenant_filter("read")
    if condition is None or caller.is_console_admin("read"):
        return {row.pk: row.created_by_label for row in rows}
    readable = set(caller.tenants("read").values_list("pk", flat=True))
    prefixes = [row.created_by_label[4:] for row in rows if row.created_by_label.startswith("key:")]
    key_tenants: dict[str, int | None] = dict(
        ApiKey.objects.filter(prefix__in=prefixes).values_list("prefix", "tenant_id")
    )
    users = {row.created_by_id for row in rows if row.created_by_id is not None}
    shown_users = set(Membership.objects.filter(user__in=users, tenant__in=readable).values_list("user_id", flat=True))
    shown_users |= set(User.objects.filter(pk__in=users, is_superuser=True).values_list("pk", flat=True))
    return {row.pk: _author_label(row, readable, key_tenants, shown_users) for row in rows}


def _author_label(
    row: GuardrailRevision, readable: set[int], key_tenants: dict[str, int | None], shown_users: set[int]
) -> str:
    label = row.created_by_label
    if label.startswith("key:"):
        tenant = key_tenants.get(label[4:])
        return label if tenant is None or tenant in readable else "an API key of another tenant"
    if row.created_by_id is not None and row.created_by_id not in shown_users:
        return "a person of another tenant"
    return label
