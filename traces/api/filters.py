"""Query-parameter filters of the trace, violation and ledger lists."""

from __future__ import annotations

from datetime import UTC, datetime, time
from typing import Any

import django_filters
from django import forms
from django.db.models import QuerySet
from django.utils import timezone
from drf_spectacular.utils import extend_schema_field
from rest_framework.exceptions import ValidationError

from traces.models import MODES, JudgeLedgerEntry, LedgerDay, RunTrace, Violation

MAX_ID = 2**63 - 1


@extend_schema_field({"type": "integer", "minimum": 1, "maximum": MAX_ID})
class IdFilter(django_filters.NumberFilter):
    """A row's id: a whole number the database's key can hold (a 400 otherwise, never a 500)."""

    field_class = forms.IntegerField  # type: ignore[assignment]  # whole numbers, not decimals

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, min_value=1, max_value=MAX_ID, **kwargs)

class UtcDateTimeFilter(django_filters.IsoDateTimeFilter):
    """An RFC 3339 time, compared in UTC (PostgreSQL refuses offsets beyond 15:59)."""

    def filter(self, qs: Any, value: datetime | None) -> Any:
        if value is not None:
            try:
                value = value.astimezone(UTC)
            except OverflowError:
                raise ValidationError("a time filter is out of range") from None
        return super().filter(qs, value)


class StrictFilterSet(django_filters.FilterSet):
    """A filter given with no value is an error, not silently ignored (a time, a choice)."""

    def is_valid(self) -> bool:
        valid: bool = super().is_valid()
        for name, field in self.filters.items():
            strict = isinstance(field, django_filters.IsoDateTimeFilter | django_filters.ChoiceFilter)
            if strict and (self.data or {}).get(name) == "":
                self.form.add_error(name, "give a value, or leave the parameter out")
                valid = False
        return valid


SEVERITIES = [(name, name) for name in ("info", "warn", "error", "critical")]


class TraceFilter(StrictFilterSet):
    agent = django_filters.CharFilter()
    flow = django_filters.CharFilter()
    tenant = django_filters.CharFilter(field_name="tenant__slug")
    since = UtcDateTimeFilter(
        field_name="received_at", lookup_expr="gte", help_text="Received at or after (RFC 3339)."
    )
    until = UtcDateTimeFilter(
        field_name="received_at", lookup_expr="lt", help_text="Received before (RFC 3339)."
    )

    class Meta:
        model = RunTrace
        fields: list[str] = []


class ViolationFilter(StrictFilterSet):
    guardrail = django_filters.CharFilter(field_name="guardrail__guardrail_id")
    severity = django_filters.ChoiceFilter(choices=SEVERITIES)
    action = django_filters.CharFilter()
    agent = django_filters.CharFilter()
    flow = django_filters.CharFilter()
    mode = django_filters.ChoiceFilter(choices=MODES)
    tenant = django_filters.CharFilter(field_name="tenant__slug")
    state = django_filters.ChoiceFilter(choices=Violation.State.choices)
    evaluation = IdFilter(field_name="evaluation_id", help_text="the run that found it")
    since = UtcDateTimeFilter(field_name="created_at", lookup_expr="gte")
    until = UtcDateTimeFilter(field_name="created_at", lookup_expr="lt")

    class Meta:
        model = Violation
        fields: list[str] = []


class LedgerFilter(StrictFilterSet):
    guardrail = django_filters.CharFilter(field_name="guardrail__guardrail_id")
    tenant = django_filters.CharFilter(field_name="tenant__slug")
    model = django_filters.CharFilter(field_name="model_id")
    since = UtcDateTimeFilter(field_name="created_at", lookup_expr="gte")
    until = UtcDateTimeFilter(field_name="created_at", lookup_expr="lt")

    class Meta:
        model = JudgeLedgerEntry
        fields: list[str] = []


#: The ledger filters' fields on the daily roll-up (`LedgerDay`), but for the times.
_DAY_FIELDS = {"guardrail": "guardrail__guardrail_id", "tenant": "tenant__slug", "model": "model_id"}


def ledger_days(days: QuerySet[LedgerDay], filterset: LedgerFilter) -> QuerySet[LedgerDay] | None:
    """`days` (the caller's roll-up rows) under a valid LedgerFilter's filters, or None when
    its times are not whole days (a midnight of the console's time zone): those need the entries."""
    if not filterset.is_valid():
        return None
    data = filterset.form.cleaned_data
    conditions: dict[str, Any] = {
        lookup: data[name] for name, lookup in _DAY_FIELDS.items() if data.get(name) not in (None, "")
    }
    for name, lookup in (("since", "day__gte"), ("until", "day__lt")):
        value = data.get(name)
        if value is None:
            continue
        local = timezone.localtime(value)
        if local.time() != time.min:
            return None
        conditions[lookup] = local.date()
    return days.filter(**conditions)
