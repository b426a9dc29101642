"""The admin of the judge models, tenants' judge policies and cached judgements, checked
as the API checks them (imported by traces.admin)."""

from typing import Any

from django import forms
from django.contrib import admin

from guardrails.models import JudgeCacheEntry, JudgeModelRegistration, TenantJudgePolicy
from kindgi_console.audit.admin import AuditedAdmin
from traces.judge.registry import api_key_set, registration_doc, validate_policy, validate_registration


class JudgeModelForm(forms.ModelForm):  # type: ignore[type-arg]
    """The admin's form of a registration, checked like the API checks one."""

    class Meta:
        model = JudgeModelRegistration
        fields = [
            "model_id",
            "provider",
            "model",
            "base_url",
            "api_key_env",
            "input_usd_per_mtok",
            "output_usd_per_mtok",
            "capabilities",
            "thinking",
            "sampling",
            "enabled",
        ]
        help_texts = {"api_key_env": "The NAME of the environment variable holding the key: never the key itself."}

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        if self.errors:
            return data
        row = JudgeModelRegistration(**{name: data.get(name) for name in self.Meta.fields if name in data})
        row.capabilities = data.get("capabilities") or []
        for issue in validate_registration(registration_doc(row, console_fields=False)):
            if issue.path == "/apiKeyEnv":  # on its field, as the page shows it
                self.add_error("api_key_env", f"{issue.path}: {issue.message}")
                return data
            raise forms.ValidationError(f"{issue.path or '/'}: {issue.message}")
        return data


@admin.register(JudgeModelRegistration)
class JudgeModelRegistrationAdmin(AuditedAdmin):
    form = JudgeModelForm
    list_display = [
        "model_id",
        "provider",
        "model",
        "input_usd_per_mtok",
        "output_usd_per_mtok",
        "sampling",
        "enabled",
        "key_set",
    ]
    list_filter = ["provider", "enabled"]
    search_fields = ["model_id", "model"]

    @admin.display(boolean=True, description="key set")
    def key_set(self, row: JudgeModelRegistration) -> bool | None:
        return api_key_set(row)


class TenantJudgePolicyForm(forms.ModelForm):  # type: ignore[type-arg]
    """Allowed model ids must be registered; empty (null) allows every model."""

    class Meta:
        model = TenantJudgePolicy
        fields = ["tenant", "allowed_models"]

    def clean_allowed_models(self) -> Any:
        allowed = self.cleaned_data.get("allowed_models")
        issues = validate_policy({"allowedModels": allowed})
        if issues:
            raise forms.ValidationError(f"{issues[0].path}: {issues[0].message}")
        return allowed


@admin.register(TenantJudgePolicy)
class TenantJudgePolicyAdmin(AuditedAdmin):
    list_display = ["tenant", "allowed_models", "updated_at"]
    list_select_related = ["tenant"]
    form = TenantJudgePolicyForm


@admin.register(JudgeCacheEntry)
class JudgeCacheEntryAdmin(admin.ModelAdmin[JudgeCacheEntry]):
    """Read and clear cached judgements (deleting one makes the next evaluation pay again)."""

    list_display = ["key", "model_id", "created_at"]
    search_fields = ["key"]
    readonly_fields = ["key", "outcome", "model_id", "created_at"]

    def has_add_permission(self, request: object) -> bool:
        return False
