"""Django's admin site writes to the audit log too, and shows it read-only.

`AuditedAdmin` is the base of the admin classes of audited models (tenants, members, API
keys, guardrails, judge models and policies, violations): each save records the form's
changed fields, each deletion the object, in the admin's own transaction.
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.db import models, transaction
from django.forms.models import model_to_dict
from django.http import HttpRequest

from kindgi_console.audit import log as audit
from kindgi_console.audit.models import AuditEntry


def _value(value: Any) -> Any:
    if isinstance(value, models.Model):
        return str(value)
    if isinstance(value, models.QuerySet | list | tuple):
        return [_value(item) for item in value]
    return value


def fields_of(obj: models.Model) -> dict[str, Any]:
    """An object's editable fields, as a deletion's `before`."""
    return {name: _value(value) for name, value in model_to_dict(obj).items()}


def _record(request: HttpRequest, obj: models.Model, verb: str, before: Any = None, after: Any = None) -> None:
    with transaction.atomic():  # the admin's transaction, or (a bulk action) one of its own
        audit.record(
            f"{obj._meta.model_name}.admin-{verb}",
            obj,
            before=before,
            after=after,
            actor=request.user,
            object_repr=str(obj)[:300],
        )


def record_form(request: HttpRequest, obj: models.Model, form: Any, verb: str) -> None:
    """An entry with the fields the form changed, before and after."""
    fields = [name for name in form.changed_data if name in form.cleaned_data]
    before = {name: _value(form.initial.get(name)) for name in fields} if verb == "change" else None
    _record(request, obj, verb, before, {name: _value(form.cleaned_data[name]) for name in fields})


class AuditedAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    """A ModelAdmin whose adds, changes and deletions are written to the audit log."""

    def save_model(self, request: HttpRequest, obj: Any, form: Any, change: bool) -> None:
        super().save_model(request, obj, form, change)
        record_form(request, obj, form, "change" if change else "add")

    def save_formset(self, request: HttpRequest, form: Any, formset: Any, change: bool) -> None:
        for inline in formset.deleted_forms:
            if inline.instance.pk:
                _record(request, inline.instance, "delete", fields_of(inline.instance))
        super().save_formset(request, form, formset, change)
        for inline in formset.forms:
            if inline in formset.deleted_forms or not inline.has_changed() or not inline.instance.pk:
                continue
            record_form(request, inline.instance, inline, "change" if inline.initial else "add")

    def delete_model(self, request: HttpRequest, obj: Any) -> None:
        _record(request, obj, "delete", fields_of(obj))
        super().delete_model(request, obj)

    def delete_queryset(self, request: HttpRequest, queryset: Any) -> None:
        with transaction.atomic():
            for obj in queryset:
                _record(request, obj, "delete", fields_of(obj))
            super().delete_queryset(request, queryset)


@admin.register(AuditEntry)
class AuditEntryAdmin(admin.ModelAdmin[AuditEntry]):
    """Read only: the log is append-only."""

    list_display = ["created_at", "tenant", "actor", "action", "object_repr"]
    list_filter = ["object_type", "tenant"]
    search_fields = ["actor", "object_id", "object_repr"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False
