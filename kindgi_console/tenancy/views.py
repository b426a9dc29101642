"""The pages' side of tenant scoping."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.mixins import LoginRequiredMixin

from kindgi_console.tenancy.scoping import Caller


class TenantScopedMixin(LoginRequiredMixin):
    """For list and detail pages of tenant-owned models: only the signed-in user's tenants.

    Another tenant's object is then absent from the queryset, so detail views answer 404.
    """

    scope = "read"

    @property
    def caller(self) -> Caller:
        return Caller(user=self.request.user)  # type: ignore[attr-defined]

    def get_queryset(self) -> Any:
        return super().get_queryset().for_caller(self.caller, self.scope)  # type: ignore[misc]
