"""`record`: the one way an audit entry is written, inside the transaction of its change.

Services call `record(action, obj, before=…, after=…)` next to the write they audit. Who
acted comes from the argument `actor` when the service knows it (a `Caller`, a guardrail
`Author`, a user), else from the request being served (`AuditActorMiddleware`: the API
key's prefix, or the signed-in user), else from `acting_as` (commands), else `system`.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from django.core.serializers.json import DjangoJSONEncoder
from django.db import connection, models
from django.http import HttpRequest, HttpResponse

from kindgi_console.audit.models import AuditEntry
from kindgi_console.audit.redaction import redacted
from kindgi_console.tenancy.models import ApiKey, Tenant

#: Fields whose values never enter the log: only that they changed.
SECRET_FIELDS = frozenset({"secret", "hash", "api_key", "password"})
SECRET_MARK = "(secret)"  # noqa: S105 (a placeholder, not a secret)

_request: ContextVar[HttpRequest | None] = ContextVar("audit_request", default=None)
_label: ContextVar[str | None] = ContextVar("audit_label", default=None)


@dataclass(frozen=True)
class Actor:
    """Who made a change: a user (or none, for a key or a command) and how they are named."""

    user: Any
    label: str


class AuditActorMiddleware:
    """Makes the request being served the default actor of the entries it causes."""

    def __init__(self, get_response: Any) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        token = _request.set(request)
        try:
            response: HttpResponse = self.get_response(request)
            return response
        finally:
            _request.reset(token)


@contextmanager
def acting_as(label: str) -> Iterator[None]:
    """Name the actor of changes made outside a request (a command, a task)."""
    token = _label.set(label)
    try:
        yield
    finally:
        _label.reset(token)


def actor_of(who: object = None) -> Actor:
    """The actor: explicit (Caller, Author, user), else the request's, else the context's."""
    if who is not None:
        return _explicit_actor(who)
    request = _request.get()
    if request is not None:
        key = getattr(request, "auth", None)  # DRF puts the authenticating key there
        if isinstance(key, ApiKey):
            return Actor(None, key.label)
        user = getattr(request, "user", None)
        if user is not None and user.is_authenticated:
            return Actor(user, user.get_username())
    return Actor(None, _label.get() or "system")


def _explicit_actor(who: object) -> Actor:
    if hasattr(who, "label") and hasattr(who, "user_or_none"):  # a Caller
        return Actor(who.user_or_none, str(who.label))
    if hasattr(who, "label") and hasattr(who, "user"):  # a guardrail Author
        user = who.user
        return Actor(user if getattr(user, "is_authenticated", False) else None, str(who.label))
    if hasattr(who, "get_username"):
        return Actor(who, who.get_username())
    return Actor(None, str(who))


def plain(value: Any) -> Any:
    """`value` as JSON would give it back (dates, decimals and UUIDs as text)."""
    return json.loads(json.dumps(value, cls=DjangoJSONEncoder))


def diff(before: Mapping[str, Any] | None, after: Mapping[str, Any] | None) -> dict[str, list[Any]]:
    """`{field: [before, after]}` for every field that differs; secrets only as changed, URLs
    with their credentials masked (a changed token shows as a change of a masked URL)."""
    old, new = plain(dict(before or {})), plain(dict(after or {}))
    changes: dict[str, list[Any]] = {}
    for name in sorted(set(old) | set(new)):
        if old.get(name) == new.get(name):
            continue
        if name in SECRET_FIELDS:
            changes[name] = [SECRET_MARK if name in old else None, SECRET_MARK if name in new else None]
        else:
            changes[name] = [redacted(old.get(name)), redacted(new.get(name))]
    return changes


def _tenant_id(obj: models.Model | None, tenant: Tenant | int | str | None) -> int | None:
    if isinstance(tenant, Tenant):
        return tenant.pk
    if isinstance(tenant, int) or tenant is None:
        return tenant
    if isinstance(obj, Tenant):
        return obj.pk
    return getattr(obj, "tenant_id", None)


def record(
    action: str,
    obj: models.Model | None = None,
    *,
    before: Mapping[str, Any] | None = None,
    after: Mapping[str, Any] | None = None,
    tenant: Tenant | int | str | None = "of the object",
    object_id: str | None = None,
    object_repr: str | None = None,
    actor: object = None,
) -> AuditEntry:
    """Write the entry of one change, in the transaction that makes the change.

    `action` is `<object type>.<verb>`; `tenant` defaults to the object's. Outside a
    transaction the change would already be committed without its entry: that is refused.
    """
    if not connection.in_atomic_block:
        raise RuntimeError(f"audit.record({action!r}) must run inside the change's transaction")
    who = actor_of(actor)
    return AuditEntry.objects.create(
        tenant_id=_tenant_id(obj, tenant),
        actor_user=who.user,
        actor=who.label[:200],
        action=action,
        object_type=action.partition(".")[0],
        object_id=(object_id if object_id is not None else str(getattr(obj, "pk", "") or ""))[:300],
        object_repr=(object_repr if object_repr is not None else str(obj or ""))[:300],
        changes=diff(before, after),
    )


@dataclass(frozen=True)
class Change:
    """One change of many made at once (a bulk review): its tenant, object and fields."""

    tenant_id: int | None
    object_id: str
    object_repr: str
    before: Mapping[str, Any] | None
    after: Mapping[str, Any] | None


def record_many(action: str, changes: list[Change], *, actor: object = None) -> list[AuditEntry]:
    """An entry per change, in one INSERT, inside the changes' transaction."""
    if not connection.in_atomic_block:
        raise RuntimeError(f"audit.record_many({action!r}) must run inside the changes' transaction")
    who = actor_of(actor)
    return AuditEntry.objects.bulk_create(
        AuditEntry(
            tenant_id=change.tenant_id,
            actor_user=who.user,
            actor=who.label[:200],
            action=action,
            object_type=action.partition(".")[0],
            object_id=change.object_id[:300],
            object_repr=change.object_repr[:300],
            changes=diff(change.before, change.after),
        )
        for change in changes
    )
