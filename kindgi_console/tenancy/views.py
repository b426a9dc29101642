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

from kindgi_console.tenancy.models import Tenant
from kindgi_console.tenancy.scoping import (
    SESSION_TENANT,
    Caller,
    administers_any,
    current_rows,
    current_tenant,
    may_in_any,
    tenant_choices,
)


def console_context(request: HttpRequest) -> dict[str, Any]:
    """Template context for every page: the tenant switcher and the admin section."""
    if not request.user.is_authenticated:
        return {}
    tenant = current_tenant(request)
    return {
        "current_tenant": tenant,
        "tenant_choices": request._kindgi_choices,  # type: ignore[attr-defined]
        "is_console_admin": administers_any(request.user),
        # Asked only by the pages that show it (the navigation's Uploads): a template calls it.
        "may_upload": lambda: may_in_any(request, "ingest"),
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
    """For pages of a tenant-owned `model`: the current tenant's rows only (`current_rows`).

    The queryset is first narrowed by the one scoping method (`for_caller`), then to the
    tenant picked with the switcher; another tenant's object is absent, so detail views
    answer 404. Over a plain View as well as Django's list and detail views.
    """

    scope = "read"
    model: Any

    @property
    def caller(self) -> Caller:
        return Caller(user=self.request.user)  # type: ignore[attr-defined]

    @property
    def tenant(self) -> Tenant | None:
        return current_tenant(self.request)  # type: ignore[attr-defined]

    def get_queryset(self) -> Any:
        parent = getattr(super(), "get_queryset", None)
        rows = parent() if parent is not None else self.model._default_manager.all()
        return current_rows(self.request, rows, self.scope)  # type: ignore[attr-defined]
