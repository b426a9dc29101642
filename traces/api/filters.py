"""Query-parameter filters of the trace, violation and ledger lists."""

from __future__ import annotations

import django_filters

from traces.models import MODES, JudgeLedgerEntry, RunTrace, Violation

SEVERITIES = [(name, name) for name in ("info", "warn", "error", "critical")]


class TraceFilter(django_filters.FilterSet):
    agent = django_filters.CharFilter()
    flow = django_filters.CharFilter()
    tenant = django_filters.CharFilter(field_name="tenant__slug")
    since = django_filters.IsoDateTimeFilter(
        field_name="received_at", lookup_expr="gte", help_text="Received at or after (RFC 3339)."
    )
    until = django_filters.IsoDateTimeFilter(
        field_name="received_at", lookup_expr="lt", help_text="Received before (RFC 3339)."
    )

    class Meta:
        model = RunTrace
        fields: list[str] = []


class ViolationFilter(django_filters.FilterSet):
    guardrail = django_filters.CharFilter(field_name="guardrail__guardrail_id")
    severity = django_filters.ChoiceFilter(choices=SEVERITIES)
    action = django_filters.CharFilter()
    agent = django_filters.CharFilter()
    flow = django_filters.CharFilter()
    mode = django_filters.ChoiceFilter(choices=MODES)
    tenant = django_filters.CharFilter(field_name="tenant__slug")
    state = django_filters.ChoiceFilter(choices=Violation.State.choices)
    since = django_filters.IsoDateTimeFilter(field_name="created_at", lookup_expr="gte")
    until = django_filters.IsoDateTimeFilter(field_name="created_at", lookup_expr="lt")

    class Meta:
        model = Violation
        fields: list[str] = []


class LedgerFilter(django_filters.FilterSet):
    guardrail = django_filters.CharFilter(field_name="guardrail__guardrail_id")
    tenant = django_filters.CharFilter(field_name="tenant__slug")
    model = django_filters.CharFilter(field_name="model_id")
    since = django_filters.IsoDateTimeFilter(field_name="created_at", lookup_expr="gte")
    until = django_filters.IsoDateTimeFilter(field_name="created_at", lookup_expr="lt")

    class Meta:
        model = JudgeLedgerEntry
        fields: list[str] = []
