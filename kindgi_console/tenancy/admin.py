from django.contrib import admin
from django.db import transaction

from kindgi_console.audit import log as audit
from kindgi_console.audit.admin import AuditedAdmin
from kindgi_console.tenancy.models import ApiKey, Membership, Tenant


class MembershipInline(admin.TabularInline[Membership, Tenant]):
    model = Membership
    extra = 0
    autocomplete_fields = ["user"]


@admin.register(Tenant)
class TenantAdmin(AuditedAdmin):
    list_display = ["slug", "name", "created_at"]
    search_fields = ["slug", "name"]
    inlines = [MembershipInline]


@admin.register(Membership)
class MembershipAdmin(AuditedAdmin):
    list_display = ["user", "tenant", "role"]
    list_filter = ["role", "tenant"]


@admin.register(ApiKey)
class ApiKeyAdmin(AuditedAdmin):
    """Keys are issued by create_api_key (the secret is shown once); here they are revoked."""

    list_display = ["prefix", "name", "tenant", "scopes", "last_used_at", "revoked_at"]
    list_filter = ["tenant"]
    readonly_fields = ["prefix", "hash", "created_at", "last_used_at", "created_by"]
    actions = ["revoke"]

    def has_add_permission(self, request: object) -> bool:
        return False

    @admin.action(description="Revoke the selected keys")
    def revoke(self, request: object, queryset: object) -> None:

        with transaction.atomic():
            for key in queryset.filter(revoked_at__isnull=True):  # type: ignore[attr-defined]
                key.revoke()
                audit.record(
                    "apikey.revoke",
                    key,
                    before={"revoked": False},
                    after={"revoked": True},
                    object_id=key.prefix,
                    actor=getattr(request, "user", None),
                )
