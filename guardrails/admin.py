from django.contrib import admin

from guardrails.models import Guardrail, GuardrailRevision
from kindgi_console.audit.admin import AuditedAdmin


class RevisionInline(admin.TabularInline[GuardrailRevision, Guardrail]):
    model = GuardrailRevision
    extra = 0
    can_delete = False
    readonly_fields = ["number", "created_by_label", "created_at", "document"]

    def has_add_permission(self, request: object, obj: object = None) -> bool:
        return False


@admin.register(Guardrail)
class GuardrailAdmin(AuditedAdmin):
    """Read and switch guardrails; documents are edited through the pages and the API,
    which validate them and make revisions."""

    list_display = [
        "guardrail_id",
        "kind",
        "check_name",
        "severity",
        "on_violation",
        "enabled",
        "revision",
        "deleted_at",
    ]
    list_filter = ["kind", "severity", "enabled"]
    search_fields = ["guardrail_id", "name"]
    readonly_fields = [
        "guardrail_id",
        "document",
        "name",
        "kind",
        "check_name",
        "severity",
        "on_violation",
        "revision",
        "created_at",
        "updated_at",
        "deleted_at",
    ]
    inlines = [RevisionInline]


@admin.register(GuardrailRevision)
class GuardrailRevisionAdmin(admin.ModelAdmin[GuardrailRevision]):
    list_display = ["guardrail", "number", "created_by_label", "created_at"]
    readonly_fields = ["guardrail", "number", "document", "created_by", "created_by_label", "created_at"]

    def has_add_permission(self, request: object) -> bool:
        return False

    def has_change_permission(self, request: object, obj: object = None) -> bool:
        return False
