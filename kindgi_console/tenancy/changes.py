"""Changes of tenants, members and API keys, each written with its audit entry.

The admin pages and the commands call these rather than the models, so that no change
of who may do what escapes the audit log (kindgi_console.audit).
"""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.db.models import QuerySet

from kindgi_console.audit import log as audit
from kindgi_console.tenancy.models import ApiKey, Membership, Tenant


def _member(membership: Membership) -> dict[str, Any]:
    return {"object_id": membership.user.get_username(), "object_repr": f"{membership.user} in {membership.tenant}"}


@transaction.atomic
def create_tenant(slug: str, name: str, admin: Any = None) -> Tenant:
    """A new tenant; `admin`, when given, becomes its first admin."""
    tenant = Tenant.objects.create(slug=slug, name=name)
    audit.record("tenant.create", tenant, after={"slug": slug, "name": name}, object_id=slug)
    if admin is not None:
        add_member(admin, tenant, Membership.Role.ADMIN)
    return tenant


@transaction.atomic
def add_member(user: Any, tenant: Tenant, role: str, *, sso: bool = False) -> Membership:
    """A new membership; `sso`: granted by single sign-on's group mapping, which manages it from now on."""
    membership = Membership.objects.create(user=user, tenant=tenant, role=role, sso=sso)
    after = {"role": role, **({"sso": True} if sso else {})}
    audit.record("member.add", membership, after=after, **_member(membership))
    return membership


@transaction.atomic
def change_role(membership: Membership, role: str) -> None:
    before = {"role": membership.role}
    membership.role = role
    membership.save(update_fields=["role"])
    audit.record("member.role", membership, before=before, after={"role": role}, **_member(membership))


def keys_made_by(membership: Membership) -> QuerySet[ApiKey]:
    """The active keys the member made for the tenant: they outlive the membership unless revoked."""
    return ApiKey.objects.active().filter(tenant=membership.tenant_id, created_by=membership.user_id)


@transaction.atomic
def remove_member(membership: Membership, *, revoke_keys: bool = False) -> list[ApiKey]:
    """Remove the member; with `revoke_keys`, also revoke the keys they made for the tenant
    (returned), in the same transaction: a key works for whoever holds it, member or not."""
    revoked = list(keys_made_by(membership).select_for_update()) if revoke_keys else []
    for key in revoked:
        revoke_key(key)
    audit.record("member.remove", membership, before={"role": membership.role}, **_member(membership))
    membership.delete()
    return revoked


@transaction.atomic
def issue_key(
    *, scopes: list[str], tenant: Tenant | None, name: str = "", created_by: Any = None, runtime_rate: str = ""
) -> tuple[ApiKey, str]:
    """A new key (and its secret, shown once); the log names it by its prefix, never the secret."""
    key, secret = ApiKey.issue(scopes=scopes, tenant=tenant, name=name, created_by=created_by)
    if runtime_rate:
        key.runtime_rate = runtime_rate
        key.save(update_fields=["runtime_rate"])
    after = {"name": name, "scopes": key.scopes, **({"runtimeRate": runtime_rate} if runtime_rate else {})}
    audit.record("apikey.create", key, after=after, object_id=key.prefix, tenant=tenant)
    return key, secret


def clean_runtime_rate(value: str) -> str:
    """A key's runtime rate as a form gives it ("" for the console's default); ValidationError
    with the field's own message otherwise."""
    cleaned: str = ApiKey._meta.get_field("runtime_rate").clean(value.strip(), None)
    return cleaned


@transaction.atomic
def set_runtime_rate(key: ApiKey, runtime_rate: str) -> bool:
    """Set a key's own limit on POST evaluate and ingestion ("": KINDGI_RUNTIME_RATE); whether it changed."""
    locked = ApiKey.objects.select_for_update().get(pk=key.pk)
    if locked.runtime_rate == runtime_rate:
        return False
    before, key.runtime_rate = locked.runtime_rate, runtime_rate
    key.save(update_fields=["runtime_rate"])
    audit.record(
        "apikey.runtime-rate",
        key,
        before={"runtimeRate": before},
        after={"runtimeRate": runtime_rate},
        object_id=key.prefix,
        tenant=key.tenant,
    )
    return True


@transaction.atomic
def revoke_key(key: ApiKey) -> None:
    key.revoke()
    audit.record("apikey.revoke", key, before={"revoked": False}, after={"revoked": True}, object_id=key.prefix)
