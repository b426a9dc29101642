"""The filters of traces, violations and the ledger, defined once (django-filter FilterSets).

The API's lists use them as their `filterset_class` (and their OpenAPI parameters come from
them), a bulk review selects violations with `ViolationFilter`, an evaluation run selects
its traces with `RunTraceFilter`, and the trace and violation pages filter with subclasses
that keep every lookup and change only what a page needs: whole days for its date inputs,
choices for its selects, the current tenant instead of `tenant`, a bad value left out. So a
filter means the same wherever it is given.
"""

from __future__ import annotations

from datetime import time
from typing import Any

import django_filters
from django.db.models import Exists, OuterRef, QuerySet
from django.utils import timezone

from kindgi_console.filters import (
    DayFilter,
    IdFilter,
    PageFilterForm,
    PageFilterSet,
    StrictFilterSet,
    UtcDateTimeFilter,
)
from traces.models import MODES, JudgeLedgerEntry, LedgerDay, RunTrace, Violation
from traces.review import STATES

SEVERITIES = [(name, name) for name in ("info", "warn", "error", "critical")]


class TraceFilter(StrictFilterSet):
    # Declared as Filter: the page's and the run's FilterSets give them other kinds (or none).
    agent = django_filters.CharFilter()
    flow = django_filters.CharFilter()
    tenant: django_filters.Filter | None = django_filters.CharFilter(field_name="tenant__slug")
    since: django_filters.Filter = UtcDateTimeFilter(
        field_name="received_at", lookup_expr="gte", help_text="Received at or after (RFC 3339)."
    )
    until: django_filters.Filter = UtcDateTimeFilter(
        field_name="received_at", lookup_expr="lt", help_text="Received before (RFC 3339)."
    )

    class Meta:
        model = RunTrace
        fields: list[str] = []


class RunTraceFilter(TraceFilter):
    """The traces an evaluation run selects in its tenant: the trace list's filters and the
    upload they came in (a run's `filters`, checked by `evaluations.clean_filters`)."""

    upload = IdFilter(field_name="upload_id")
    # A run's times were checked when it was made (evaluations.clean_filters) and are given
    # to the database as stored: an older run's time the database cannot hold fails the run
    # with the database's reason, as it always has.
    since = django_filters.IsoDateTimeFilter(field_name="received_at", lookup_expr="gte")
    until = django_filters.IsoDateTimeFilter(field_name="received_at", lookup_expr="lt")


class ViolationFilter(StrictFilterSet):
    # Declared as Filter: the page's FilterSet gives them other kinds (or none).
    guardrail: django_filters.Filter = django_filters.CharFilter(field_name="guardrail__guardrail_id")
    severity = django_filters.ChoiceFilter(choices=SEVERITIES)
    action: django_filters.Filter = django_filters.CharFilter()
    agent = django_filters.CharFilter()
    flow = django_filters.CharFilter()
    mode = django_filters.ChoiceFilter(choices=MODES)
    tenant: django_filters.Filter | None = django_filters.CharFilter(field_name="tenant__slug")
    state = django_filters.ChoiceFilter(choices=Violation.State.choices)
    evaluation = IdFilter(field_name="evaluation_id", help_text="the run that found it")
    since: django_filters.Filter = UtcDateTimeFilter(field_name="created_at", lookup_expr="gte")
    until: django_filters.Filter = UtcDateTimeFilter(field_name="created_at", lookup_expr="lt")

    class Meta:
        model = Violation
        fields: list[str] = []


ACTIONS = ("halt", "retry", "escalate", "log-only")
YES_NO = [("yes", "Yes"), ("no", "No")]


def _pairs(values: tuple[str, ...] | list[tuple[str, str]]) -> list[tuple[str, str]]:
    return [(value, value) if isinstance(value, str) else value for value in values]


class TracePageFilter(PageFilterSet, TraceFilter):
    """The trace list page: the filters of `GET traces` in the current tenant, and whether a
    trace was withheld or has violations."""

    tenant = None  # the page lists the current tenant's traces
    since = DayFilter(field_name="received_at", label="Since")
    until = DayFilter(field_name="received_at", end=True, label="Until")
    withheld = django_filters.ChoiceFilter(choices=YES_NO, empty_label="Any", method="filter_withheld")
    violations = django_filters.ChoiceFilter(
        choices=YES_NO, empty_label="Any", label="Has violations", method="filter_violations"
    )
    field_order = ("agent", "flow", "since", "until", "withheld", "violations")
    widget_attrs = {
        "agent": {"list": "agent-options", "placeholder": "any agent"},
        "flow": {"list": "flow-options", "placeholder": "any flow"},
    }

    class Meta(TraceFilter.Meta):
        form = PageFilterForm

    def filter_withheld(self, traces: QuerySet[RunTrace], name: str, value: str) -> QuerySet[RunTrace]:
        return traces.filter(withheld=value == "yes")

    def filter_violations(self, traces: QuerySet[RunTrace], name: str, value: str) -> QuerySet[RunTrace]:
        has = Exists(Violation.objects.filter(trace=OuterRef("pk")))
        return traces.filter(has if value == "yes" else ~has)


class ViolationPageFilter(PageFilterSet, ViolationFilter):
    """The violation list page, its charts, its bulk review and the review queue: every filter
    of `GET violations` in the current tenant, with selects for the guardrails and actions."""

    tenant = None  # the page lists the current tenant's violations
    guardrail = django_filters.ChoiceFilter(field_name="guardrail__guardrail_id", empty_label="Any", label="Guardrail")
    severity = django_filters.ChoiceFilter(choices=SEVERITIES, empty_label="Any", label="Severity")
    action = django_filters.ChoiceFilter(choices=_pairs(ACTIONS), empty_label="Any", label="Action")
    state = django_filters.ChoiceFilter(choices=_pairs(STATES), empty_label="Any", label="State")
    mode = django_filters.ChoiceFilter(choices=_pairs(MODES), empty_label="Any", label="Mode")
    evaluation = IdFilter(field_name="evaluation_id", label="Run")
    since = DayFilter(field_name="created_at", label="Since")
    until = DayFilter(field_name="created_at", end=True, label="Until")
    field_order = ("guardrail", "severity", "action", "state", "mode", "agent", "evaluation", "flow", "since", "until")
    widget_attrs = {
        "agent": {"placeholder": "any agent"},
        "flow": {"placeholder": "any flow"},
        "evaluation": {"placeholder": "any run"},
    }

    class Meta(ViolationFilter.Meta):
        form = PageFilterForm

    def __init__(self, data: Any = None, *args: Any, guardrails: list[tuple[str, str]], **kwargs: Any) -> None:
        super().__init__(data, *args, **kwargs)
        self.filters["guardrail"].extra["choices"] = guardrails


class LedgerFilter(StrictFilterSet):
    # Declared as Filter: the page's FilterSet gives them other kinds.
    guardrail: django_filters.Filter = django_filters.CharFilter(field_name="guardrail__guardrail_id")
    tenant: django_filters.Filter = django_filters.CharFilter(field_name="tenant__slug")
    model = django_filters.CharFilter(field_name="model_id")
    since: django_filters.Filter = UtcDateTimeFilter(field_name="created_at", lookup_expr="gte")
    until: django_filters.Filter = UtcDateTimeFilter(field_name="created_at", lookup_expr="lt")

    class Meta:
        model = JudgeLedgerEntry
        fields: list[str] = []


#: What the ledger page's sums can be grouped by (not a filter: a field beside the bar).
LEDGER_GROUPS = [("guardrail", "Guardrail"), ("model", "Model"), ("tenant", "Tenant"), ("day", "Day")]
#: The ledger page's tenant for "every tenant I may read".
ALL_TENANTS = "*"


class LedgerPageFilter(PageFilterSet, LedgerFilter):
    """The ledger page and its CSV: the filters of `GET ledger`, in the current tenant unless
    the person picks another of theirs or all of them, on the entries or the daily roll-up."""

    since = DayFilter(field_name="created_at", label="Since")
    until = DayFilter(field_name="created_at", end=True, label="Until")
    guardrail = django_filters.ChoiceFilter(field_name="guardrail__guardrail_id", empty_label="Any", label="Guardrail")
    tenant = django_filters.ChoiceFilter(label="Tenant", empty_label="Current tenant", method="filter_tenant")
    model = django_filters.CharFilter(field_name="model_id", max_length=200, label="Model")
    field_order = ("since", "until", "guardrail", "tenant", "model")
    widget_attrs = {"model": {"list": "model-options", "placeholder": "any model"}}

    class Meta(LedgerFilter.Meta):
        form = PageFilterForm

    def __init__(
        self,
        data: Any = None,
        *args: Any,
        guardrails: list[tuple[str, str]],
        tenants: list[tuple[str, str]],
        current_tenant: Any,
        **kwargs: Any,
    ) -> None:
        super().__init__(data, *args, **kwargs)
        self.filters["guardrail"].extra["choices"] = guardrails
        self.filters["tenant"].extra["choices"] = [(ALL_TENANTS, "All my tenants"), *tenants]
        self.current_tenant = current_tenant

    def filter_tenant(self, rows: QuerySet[Any], name: str, value: str) -> QuerySet[Any]:
        return rows if value == ALL_TENANTS else rows.filter(tenant__slug=value)

    def in_tenant(self, rows: QuerySet[Any]) -> QuerySet[Any]:
        if self.value("tenant"):
            return rows
        return rows.filter(tenant=self.current_tenant)  # none picked, or not one of theirs

    def filter_queryset(self, queryset: QuerySet[Any]) -> QuerySet[Any]:
        return super().filter_queryset(self.in_tenant(queryset))

    def days(self, days: QuerySet[LedgerDay]) -> QuerySet[LedgerDay]:
        """The daily roll-up's rows under the same filters (the page's times are whole days)."""
        days = self.in_tenant(days)
        for name in _DAY_FIELDS:
            value = self.value(name)
            if value not in (None, ""):
                days = self.filters[name].filter(days, value)
        for name, lookup in (("since", "day__gte"), ("until", "day__lte")):
            if self.value(name):
                days = days.filter(**{lookup: self.value(name)})
        return days


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
