"""The audit log's one filter, used by `GET audit`, the page (through its page subclass and
the filter bar partial) and its CSV export."""

from __future__ import annotations

from typing import Any

import django_filters
from django import forms

from kindgi_console.audit.models import AuditEntry
from kindgi_console.filters import PageFilterForm, PageFilterSet, StrictFilterSet, UtcDateTimeFilter


class AuditFilter(StrictFilterSet):
    tenant = django_filters.CharFilter(field_name="tenant__slug", max_length=100)
    action = django_filters.CharFilter(max_length=100, help_text="e.g. guardrail.update")
    object_type = django_filters.CharFilter(max_length=100, help_text="e.g. guardrail, apikey")
    object_id = django_filters.CharFilter(max_length=300)
    actor = django_filters.CharFilter(max_length=200, help_text="a username, or key:<prefix>")
    since = UtcDateTimeFilter(field_name="created_at", lookup_expr="gte")
    until = UtcDateTimeFilter(field_name="created_at", lookup_expr="lt")

    class Meta:
        model = AuditEntry
        fields: list[str] = []


def entry_json(entry: AuditEntry) -> dict[str, object]:
    return {
        "id": entry.pk,
        "createdAt": entry.created_at.isoformat(),
        "tenant": entry.tenant.slug if entry.tenant_id and entry.tenant else None,
        "actor": entry.actor,
        "action": entry.action,
        "objectType": entry.object_type,
        "objectId": entry.object_id,
        "object": entry.object_repr,
        "changes": entry.changes,
    }


class AuditPageFilter(PageFilterSet, AuditFilter):
    """The audit log page: the filters of `GET audit`, the tenant picked from those the
    person administers (any other slug still matches nothing, as in the API)."""

    field_order = ("tenant", "object_type", "action", "object_id", "actor", "since", "until")
    widget_attrs = {
        "object_type": {"placeholder": "guardrail, apikey, member…"},
        "action": {"placeholder": "guardrail.update"},
        "actor": {"placeholder": "alice, key:kgi_…"},
    }

    class Meta(AuditFilter.Meta):
        form = PageFilterForm

    def __init__(self, data: Any = None, *args: Any, tenants: list[tuple[str, str]], **kwargs: Any) -> None:
        super().__init__(data, *args, **kwargs)
        labels = {"tenant": "Tenant", "object_type": "Object", "action": "Action", "object_id": "Object id"}
        for name, label in (*labels.items(), ("actor", "Who"), ("since", "Since"), ("until", "Until")):
            self.filters[name].label = label
        self.filters["tenant"].extra["widget"] = forms.Select(choices=tenants)
