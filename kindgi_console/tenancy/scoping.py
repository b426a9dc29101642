"""Who is asking (a user or an API key) and the one place tenant scoping happens.

Every tenant-owned model's queryset is a `TenantScopedQuerySet`; its `for_caller` narrows
it to the tenants the caller may act on. The API's base view and the pages'
`TenantScopedMixin` apply it, so no view filters by tenant by hand. The other questions a
view asks are answered here too: the tenants the caller may act on (`Caller.tenants`), the
current tenant's rows on a page (`current_rows`), and who administers a tenant
(`is_admin_of`, `administered_tenants`). A view that needs another adds it here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, TypeVar

from django.db import models
from django.http import HttpRequest

from kindgi_console.tenancy.models import ROLE_FOR_SCOPE, ApiKey, Membership, Tenant, key_scope, roles_at_least

M = TypeVar("M", bound=models.Model)

#: The filter that selects nothing (a key without the scope, a visitor).
NOTHING = models.Q(pk__in=[])


class TenantDenied(Exception):
    """The caller may not act on the tenant it named (or named none when it had to)."""

    def __init__(self, message: str, *, status: int = 403) -> None:
        super().__init__(message)
        self.status = status


@dataclass
class Caller:
    """The one who makes a request: a signed-in user or an API key.

    Capabilities are named after key scopes (`read`, `ingest`, `evaluate`, `author`); a
    user has them through a role (`ROLE_FOR_SCOPE`) in at least one tenant.
    """

    user: Any = None
    key: ApiKey | None = None
    _tenants: dict[tuple[str, str], Tenant] = field(default_factory=dict, repr=False)
    _member_ids: dict[str, list[int]] = field(default_factory=dict, repr=False)

    @classmethod
    def from_request(cls, request: HttpRequest, auth: object = None) -> Caller:
        if isinstance(auth, ApiKey):
            return cls(key=auth)
        return cls(user=getattr(request, "user", None))

    @property
    def is_authenticated(self) -> bool:
        if self.key is not None:
            return True
        return bool(self.user is not None and self.user.is_authenticated)

    @property
    def is_superuser(self) -> bool:
        return self.key is None and bool(getattr(self.user, "is_superuser", False))

    @property
    def label(self) -> str:
        """How the caller is named in revisions and evaluation runs."""
        if self.key is not None:
            return self.key.label
        return str(getattr(self.user, "username", "") or "anonymous")

    @property
    def user_or_none(self) -> Any:
        return self.user if self.key is None and self.is_authenticated else None

    def can(self, scope: str) -> bool:
        """Whether the caller may do `scope` anywhere (in at least one tenant, for users)."""
        if not self.is_authenticated:
            return False
        if self.key is not None:
            return key_scope(scope) in self.key.scopes
        if self.is_superuser:
            return True
        return bool(self._member_tenant_ids(scope))

    def tenant_filter(self, scope: str = "read") -> models.Q | None:
        """A filter on `tenant_id` for what the caller may do `scope` on; None: everything."""
        return self._tenant_condition(scope, "tenant_id")

    def tenants(self, scope: str = "read") -> models.QuerySet[Tenant]:
        """The tenants on which the caller may do `scope` (every one, for a superuser)."""
        condition = self._tenant_condition(scope, "pk")
        if condition is None:
            return Tenant.objects.all()
        if condition is NOTHING:
            return Tenant.objects.none()
        return Tenant.objects.filter(condition)

    def _tenant_condition(self, scope: str, column: str) -> models.Q | None:
        """`tenant_filter` on `column`, a tenant's id (NOTHING: none; None: every tenant)."""
        if self.is_superuser:
            return None
        if self.key is not None:
            if self.key.tenant_id is None or key_scope(scope) not in self.key.scopes:
                return NOTHING
            return models.Q(**{column: self.key.tenant_id})
        if not self.is_authenticated:
            return NOTHING
        ids = self._member_tenant_ids(scope)
        return models.Q(**{f"{column}__in": ids}) if ids else NOTHING

    def _member_tenant_ids(self, scope: str) -> list[int]:
        """The ids of the tenants where the user has a role for `scope`, read once per caller.

        A list, not a subquery: the planner then sees `tenant_id IN (…)` and takes the
        tenant's index of the table, where a semi-join let it walk another index over every
        tenant's rows (the violations filtered by severity and state).
        """
        if scope not in self._member_ids:
            roles = roles_at_least(ROLE_FOR_SCOPE[scope])
            self._member_ids[scope] = list(
                Membership.objects.filter(user=self.user, role__in=roles).values_list("tenant_id", flat=True)
            )
        return self._member_ids[scope]

    def is_console_admin(self, scope: str = "author") -> bool:
        """Whether the caller acts for the whole console: a superuser, or a key bound to no
        tenant that has `scope`. Console admins write the console-wide guardrails."""
        if self.key is not None:
            return self.key.tenant_id is None and scope in self.key.scopes
        return self.is_superuser

    def guardrail_filter(self, scope: str = "read") -> models.Q | None:
        """A filter on guardrails for what the caller may do `scope` on; None: every one.

        Reading sees the console-wide guardrails and those of the tenants the caller reads;
        writing (`author`) only the guardrails of tenants the caller authors for.
        """
        if self.is_console_admin(scope):
            return None
        own = self.tenant_filter(scope)
        if scope != "read" or not self.can("read"):
            return own
        console_wide = models.Q(tenant__isnull=True)
        return console_wide if own is NOTHING or own is None else console_wide | own

    def guardrail_owner(self, slug: str | None) -> Tenant | None:
        """The owner of a guardrail the caller creates: the tenant it names (or the key's,
        or the only one a person authors for); None, the whole console, for a console admin
        naming none. Raises TenantDenied as `tenant_for_write` does."""
        if self.key is not None and self.key.tenant_id is not None:
            return self.tenant_for_write(slug, "author")
        if self.is_console_admin("author"):
            if not slug:
                return None
            tenant = Tenant.objects.filter(slug=slug).first()
            if tenant is None:
                raise TenantDenied(f"there is no tenant {slug!r}", status=400)
            return tenant
        if self.key is not None:
            raise TenantDenied("this API key lacks the 'author' scope")
        if not slug:
            authored = list(self._authored_tenants()[:2])
            if len(authored) == 1:
                return authored[0]
        return self.tenant_for_write(slug, "author")

    def _authored_tenants(self) -> models.QuerySet[Tenant]:
        roles = roles_at_least(ROLE_FOR_SCOPE["author"])
        return Tenant.objects.filter(memberships__user=self.user, memberships__role__in=roles)

    def tenant_for_write(self, slug: str | None, scope: str) -> Tenant:
        """The tenant a write names (or the key's), if the caller may do `scope` there.

        Raises TenantDenied: a tenant-bound key naming another tenant, a key bound to no
        tenant, or a user who is not an author of the tenant, all 403; a user naming no
        tenant, 400.
        """
        if slug and "\x00" in slug:  # no tenant's name holds one, and PostgreSQL could not look it up
            raise TenantDenied("a tenant's slug holds no NUL character", status=400)
        cache_key = (slug or "", scope)
        if cache_key not in self._tenants:
            self._tenants[cache_key] = self._resolve_tenant(slug, scope)
        return self._tenants[cache_key]

    def _resolve_tenant(self, slug: str | None, scope: str) -> Tenant:
        if self.key is not None:
            return self._key_tenant(self.key, slug, scope)
        if not slug:
            raise TenantDenied("name the tenant: a signed-in user writes to one tenant", status=400)
        if self.is_superuser:
            tenant = Tenant.objects.filter(slug=slug).first()
            if tenant is None:
                raise TenantDenied(f"there is no tenant {slug!r}", status=400)
            return tenant
        roles = roles_at_least(ROLE_FOR_SCOPE[scope])
        membership = (
            Membership.objects.filter(user=self.user, tenant__slug=slug, role__in=roles)
            .select_related("tenant")
            .first()
        )
        if membership is None:
            raise TenantDenied(f"you may not {scope} for tenant {slug!r}")
        return membership.tenant

    @staticmethod
    def _key_tenant(key: ApiKey, slug: str | None, scope: str) -> Tenant:
        if key_scope(scope) not in key.scopes:
            raise TenantDenied(f"this API key lacks the {key_scope(scope)!r} scope")
        if key.tenant is None:
            raise TenantDenied("this API key is bound to no tenant: it cannot write traces")
        if slug and slug != key.tenant.slug:
            raise TenantDenied(f"this API key acts for tenant {key.tenant.slug!r} only, not {slug!r}")
        return key.tenant


class TenantScopedQuerySet(models.QuerySet[M]):
    """The queryset of every tenant-owned model (it has a `tenant` foreign key)."""

    def for_caller(self, caller: Caller, scope: str = "read") -> TenantScopedQuerySet[M]:
        """Only the rows of tenants on which the caller may do `scope`."""
        condition = caller.tenant_filter(scope)
        if condition is None:
            return self.all()
        if condition is NOTHING:
            return self.none()
        return self.filter(condition)


# ---------------------------------------------------------------------------- the pages' tenant

#: The session key of the tenant picked with the switcher.
SESSION_TENANT = "kindgi_tenant"


def tenant_choices(user: Any) -> list[Tenant]:
    """The tenants a signed-in person can switch between (every one, for a superuser)."""
    if not getattr(user, "is_authenticated", False):
        return []
    if user.is_superuser:
        return list(Tenant.objects.order_by("slug"))
    chosen = []
    for membership in Membership.objects.filter(user=user).select_related("tenant").order_by("tenant__slug"):
        membership.tenant.member_role = membership.role  # type: ignore[attr-defined]  # what the page may offer
        chosen.append(membership.tenant)
    return chosen


def may_in_any(request: HttpRequest, scope: str) -> bool:
    """Whether the signed-in person may do `scope` in one of their tenants, from the tenants
    the page has already read (no query of its own)."""
    if request.user.is_superuser:
        return True
    current_tenant(request)
    roles = roles_at_least(ROLE_FOR_SCOPE[scope])
    return any(getattr(tenant, "member_role", None) in roles for tenant in request._kindgi_choices)  # type: ignore[attr-defined]


def current_tenant(request: HttpRequest) -> Tenant | None:
    """The tenant chosen with the switcher, else the person's first; cached on the request."""
    if not hasattr(request, "_kindgi_tenant"):
        choices = tenant_choices(request.user)
        session = getattr(request, "session", None)
        wanted = session.get(SESSION_TENANT) if session is not None else None
        chosen = next((t for t in choices if t.slug == wanted), choices[0] if choices else None)
        request._kindgi_tenant = chosen  # type: ignore[attr-defined]
        request._kindgi_choices = choices  # type: ignore[attr-defined]
    tenant: Tenant | None = request._kindgi_tenant  # type: ignore[attr-defined]
    return tenant


def may_in_current_tenant(request: HttpRequest, scope: str) -> bool:
    """Whether the signed-in person may do `scope` in the tenant picked with the switcher."""
    tenant = current_tenant(request)
    if tenant is None:
        return False
    try:
        Caller(user=request.user).tenant_for_write(tenant.slug, scope)
    except TenantDenied:
        return False
    return True


def current_rows(request: HttpRequest, rows: Any, scope: str = "read") -> Any:
    """A tenant-owned model's rows (its manager or a queryset) as a page shows them: what the
    signed-in person may do `scope` on, in the tenant picked with the switcher; none
    without a tenant. Another tenant's row is absent, so a detail page answers 404."""
    tenant = current_tenant(request)
    scoped = rows.for_caller(Caller(user=request.user), scope)
    return scoped.filter(tenant=tenant) if tenant is not None else scoped.none()


# ---------------------------------------------------------------------------- administering


def administered_tenants(user: Any) -> models.QuerySet[Tenant]:
    """The tenants the person manages: where they are admin, or all for a superuser."""
    if user.is_superuser:
        return Tenant.objects.all()
    return Tenant.objects.filter(memberships__user=user, memberships__role=Membership.Role.ADMIN)


def is_admin_of(user: Any, tenant: Tenant | None) -> bool:
    """Whether the signed-in person administers `tenant` (a superuser, every one)."""
    if tenant is None or not getattr(user, "is_authenticated", False):
        return False
    if user.is_superuser:
        return True
    return Membership.objects.filter(user=user, tenant=tenant, role=Membership.Role.ADMIN).exists()


def administers_any(user: Any) -> bool:
    """Whether the person manages tenants, members and keys (an admin somewhere)."""
    if not getattr(user, "is_authenticated", False):
        return False
    return bool(user.is_superuser or Membership.objects.filter(user=user, role=Membership.Role.ADMIN).exists())
