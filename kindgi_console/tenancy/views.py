"""The pages' side of tenancy: the current tenant, the switcher and the scoping mixin.

A person who belongs to several tenants picks one with the switcher; the pages then show
that tenant's data (the REST API, which has no such state, shows every tenant the caller
may read).
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth.decorators import login_required
from django.contrib.auth.mixins import LoginRequiredMixin
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_POST

from kindgi_console.tenancy.models import Membership, Tenant
from kindgi_console.tenancy.scoping import Caller

SESSION_TENANT = "kindgi_tenant"


def tenant_choices(user: Any) -> list[Tenant]:
    """The tenants a signed-in person can switch between (every one, for a superuser)."""
    if not getattr(user, "is_authenticated", False):
        return []
    if user.is_superuser:
        return list(Tenant.objects.order_by("slug"))
    return [m.tenant for m in Membership.objects.filter(user=user).select_related("tenant").order_by("tenant__slug")]


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


def is_console_admin(user: Any) -> bool:
    """Whether the person manages tenants, members and keys (an admin somewhere)."""
    if not getattr(user, "is_authenticated", False):
        return False
    return bool(user.is_superuser or Membership.objects.filter(user=user, role="admin").exists())


def console_context(request: HttpRequest) -> dict[str, Any]:
    """Template context for every page: the tenant switcher and the admin section."""
    if not request.user.is_authenticated:
        return {}
    tenant = current_tenant(request)
    return {
        "current_tenant": tenant,
        "tenant_choices": request._kindgi_choices,  # type: ignore[attr-defined]
        "is_console_admin": is_console_admin(request.user),
    }


@require_POST
@login_required
def switch_tenant(request: HttpRequest) -> HttpResponse:
    """Make another of the person's tenants the current one, then go back."""
    slug = request.POST.get("tenant", "")
    if any(t.slug == slug for t in tenant_choices(request.user)):
        request.session[SESSION_TENANT] = slug
    target = request.POST.get("next") or "/"
    if not url_has_allowed_host_and_scheme(target, allowed_hosts={request.get_host()}):
        target = "/"
    return HttpResponseRedirect(target)


class TenantScopedMixin(LoginRequiredMixin):
    """For list and detail pages of tenant-owned models: the current tenant's rows only.

    The queryset is first narrowed by the one scoping method (`for_caller`), then to the
    tenant picked with the switcher; another tenant's object is absent, so detail views
    answer 404.
    """

    scope = "read"

    @property
    def caller(self) -> Caller:
        return Caller(user=self.request.user)  # type: ignore[attr-defined]

    @property
    def tenant(self) -> Tenant | None:
        return current_tenant(self.request)  # type: ignore[attr-defined]

    def get_queryset(self) -> Any:
        queryset = super().get_queryset().for_caller(self.caller, self.scope)  # type: ignore[misc]
        tenant = self.tenant
        return queryset.filter(tenant=tenant) if tenant is not None else queryset.none()
