"""The audit log's one filter, used by `GET audit`, the page and its CSV export."""

from __future__ import annotations

import django_filters

from kindgi_console.audit.models import AuditEntry
from kindgi_console.filters import StrictFilterSet, UtcDateTimeFilter


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
