"""The filters of traces, violations and the ledger, defined once (django-filter FilterSets).

The API's lists use them as their `filterset_class` (and their OpenAPI parameters come from
them), a bulk review selects violations with `ViolationFilter`, an evaluation run selects
its traces with `RunTraceFilter`, and the trace and violation pages filter with subclasses
that keep every lookup and change only what a page needs: whole days for its date inputs,
choices for its selects, the current tenant instead of `tenant`, a bad value left out. So a
filter means the same wherever it is given.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime, time
from typing import Any, cast

import django_filters
from django import forms
from django.db.models import Exists, OuterRef, QuerySet
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from guardrails.engine.types import Issue
from kindgi_console.filters import (
    DayFilter,
    IdFilter,
    PageFilterForm,
    PageFilterSet,
    StrictFilterSet,
    UtcDateTimeFilter,
)
from kindgi_console.tenancy.scoping import Caller
from traces.models import MODES, EvaluationResult, JudgeLedgerEntry, LedgerDay, RunTrace, Upload, Violation

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


#: What a run's trace selection says of each bad filter: the API's `filters` and the new-run
#: page's fields give the same messages (the API's type checks too, `evaluations.clean_filters`).
SELECTION_ERRORS = {
    "agent": "agent is a string of at most 200 characters",
    "flow": "flow is a string of at most 200 characters",
    "since": "since is an RFC 3339 date-time with a time zone, from year 1 to 9999 in UTC",
    "until": "until is an RFC 3339 date-time with a time zone, from year 1 to 9999 in UTC",
    "upload": "no upload of this tenant has this id",
}
MAX_SELECTION_TEXT = 200


class RunSelectionForm(forms.Form):
    """The form of `RunTraceFilter`. For a new run (`tenant` set: the API's `filters`, the
    new-run page) it checks what a stored selection must hold: texts of at most 200
    characters, times with a zone that UTC can hold, an upload of the tenant, until after
    since; each refusal replaces the field's own message with the one of SELECTION_ERRORS."""

    tenant: Any = None

    def clean(self) -> dict[str, Any] | None:
        cleaned = super().clean()
        if self.tenant is None:  # a stored run's selection, checked when the run was made
            return cleaned
        for name in SELECTION_ERRORS:
            raw = self.data.get(name)
            if raw is not None and not self._holds(name, raw):
                self._refuse(name, SELECTION_ERRORS[name])
        since, until = self.cleaned_data.get("since"), self.cleaned_data.get("until")
        if since is not None and until is not None and until <= since:
            self._refuse("until", "until must be after since")
        return self.cleaned_data

    def _holds(self, name: str, raw: str) -> bool:
        if name in ("agent", "flow"):
            return len(raw) <= MAX_SELECTION_TEXT
        value = self.cleaned_data.get(name)
        if name == "upload":
            return value is not None and Upload.objects.filter(pk=value, tenant=self.tenant).exists()
        try:  # naive times are refused; a valid offset can still put the moment past year 9999 in UTC
            moment = parse_datetime(raw)
            if value is None or moment is None or moment.tzinfo is None:
                return False
            value.astimezone(UTC)
        except (ValueError, OverflowError):
            return False
        return True

    def _refuse(self, name: str, message: str) -> None:
        self.errors[name] = self.error_class([message])
        self.cleaned_data.pop(name, None)


class RunTraceFilter(TraceFilter):
    """The traces an evaluation run selects in its tenant: the trace list's filters and the
    upload they came in. With `tenant`, a new selection, checked (`run_selection`)."""

    upload = IdFilter(field_name="upload_id")
    # A stored run's times are given to the database as stored: an older run's time the
    # database cannot hold fails the run with the database's reason, as it always has.
    since = django_filters.IsoDateTimeFilter(
        field_name="received_at",
        lookup_expr="gte",
        label="Since",
        help_text="Received at or after (RFC 3339 with a time zone), e.g. 2026-11-29T10:00:00Z",
    )
    until = django_filters.IsoDateTimeFilter(
        field_name="received_at",
        lookup_expr="lt",
        label="Until",
        help_text="Received before (RFC 3339 with a time zone)",
    )

    class Meta(TraceFilter.Meta):
        form = RunSelectionForm

    def __init__(self, data: Any = None, *args: Any, tenant: Any = None, **kwargs: Any) -> None:
        super().__init__(data, *args, **kwargs)
        self.tenant = tenant

    @property
    def form(self) -> RunSelectionForm:
        form = cast(RunSelectionForm, super().form)
        form.tenant = self.tenant
        return form


def run_selection(values: Mapping[str, Any], tenant: Any) -> RunTraceFilter:
    """A new run's trace selection in `tenant`, from the API's `filters` or the new-run page's
    fields: an empty value selects by nothing. Valid: `selection_filters` is what is stored."""
    data = {name: str(value) for name, value in values.items() if value not in (None, "")}
    return RunTraceFilter(data, queryset=RunTrace.objects.filter(tenant=tenant), tenant=tenant)


def selection_filters(selection: RunTraceFilter) -> dict[str, Any]:
    """The run's `trace_filters` of a valid selection: texts, an upload id, ISO times."""
    cleaned = selection.form.cleaned_data
    return {
        name: value.isoformat() if isinstance(value, datetime) else value
        for name, value in cleaned.items()
        if value not in (None, "")
    }


def selection_issues(selection: RunTraceFilter, prefix: str = "") -> list[Issue]:
    """The refusals of an invalid selection, each at its field (`prefix` + /name)."""
    return [Issue(f"{prefix}/{name}", str(errors[0])) for name, errors in selection.form.errors.items()]


def found_by_run(evaluation_id: int) -> Exists:
    """Whether a `fail` of run `evaluation_id` (not in shadow) is the violation's finding."""
    return Exists(
        EvaluationResult.objects.filter(
            evaluation_id=evaluation_id,
            trace_id=OuterRef("trace_id"),
            revision_id=OuterRef("revision_id"),
            status=EvaluationResult.Status.FAIL,
            shadow=False,
        )
    )


#: `assignee=` values that name no one in particular: the caller, and nobody (unclaimed).
ME, NOBODY = "me", "none"


class ViolationFilter(StrictFilterSet):
    """The filters of `GET violations`. `assignee=me` needs to know who asks: the request's
    caller (the API's), or the `caller` given (a page, a bulk review)."""

    # Declared as Filter: the page's FilterSet gives them other kinds (or none).
    guardrail: django_filters.Filter = django_filters.CharFilter(field_name="guardrail__guardrail_id")
    severity = django_filters.ChoiceFilter(choices=SEVERITIES)
    action: django_filters.Filter = django_filters.CharFilter()
    agent = django_filters.CharFilter()
    flow = django_filters.CharFilter()
    mode = django_filters.ChoiceFilter(choices=MODES)
    tenant: django_filters.Filter | None = django_filters.CharFilter(field_name="tenant__slug")
    state = django_filters.ChoiceFilter(choices=Violation.State.choices)
    evaluation = IdFilter(method="filter_evaluation", help_text="a run that found it (first or again)")
    queue: django_filters.Filter = django_filters.CharFilter(
        help_text="the review queue it landed in (an escalate guardrail's escalateTo)"
    )
    assignee: django_filters.Filter = django_filters.CharFilter(
        method="filter_assignee",
        help_text="who claimed it: `me` (the caller), `none` (nobody), or a user name or API key label",
    )
    since: django_filters.Filter = UtcDateTimeFilter(field_name="created_at", lookup_expr="gte")
    until: django_filters.Filter = UtcDateTimeFilter(field_name="created_at", lookup_expr="lt")

    class Meta:
        model = Violation
        fields: list[str] = []

    def __init__(self, data: Any = None, *args: Any, caller: Caller | None = None, **kwargs: Any) -> None:
        super().__init__(data, *args, **kwargs)
        if caller is None and self.request is not None:
            caller = Caller.from_request(self.request, getattr(self.request, "auth", None))
        self.caller = caller

    def filter_assignee(self, violations: QuerySet[Violation], name: str, value: str) -> QuerySet[Violation]:
        """Claimed by nobody (`none`), by the caller (`me`), or by the one named."""
        if value == NOBODY:
            return violations.filter(assignee__isnull=True)
        if value == ME:
            if self.caller is None or not self.caller.is_authenticated:
                return violations.none()
            value = self.caller.label
        return violations.filter(assignee=value)

    def filter_evaluation(self, violations: QuerySet[Violation], name: str, value: int) -> QuerySet[Violation]:
        """The violations of the findings a run failed: those it stored first, and those
        stored before it that it found again (one violation per trace and revision)."""
        return violations.filter(found_by_run(value))


ACTIONS = ("halt", "retry", "escalate", "log-only")
YES_NO = [("yes", "Yes"), ("no", "No")]
ASSIGNEES = [(ME, "Me"), (NOBODY, "Nobody (unclaimed)")]


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
    of `GET violations` in the current tenant, with selects for the guardrails, actions,
    review queues (`queues`: those the guardrails name) and who claimed it."""

    tenant = None  # the page lists the current tenant's violations
    guardrail = django_filters.ChoiceFilter(field_name="guardrail__guardrail_id", empty_label="Any", label="Guardrail")
    severity = django_filters.ChoiceFilter(choices=SEVERITIES, empty_label="Any", label="Severity")
    action = django_filters.ChoiceFilter(choices=_pairs(ACTIONS), empty_label="Any", label="Action")
    state = django_filters.ChoiceFilter(choices=_pairs(tuple(Violation.State.values)), empty_label="Any", label="State")
    mode = django_filters.ChoiceFilter(choices=_pairs(MODES), empty_label="Any", label="Mode")
    evaluation = IdFilter(method="filter_evaluation", label="Run")
    queue = django_filters.ChoiceFilter(empty_label="Any", label="Queue")
    assignee = django_filters.ChoiceFilter(
        choices=ASSIGNEES, empty_label="Anyone or nobody", label="Claimed by", method="filter_assignee"
    )
    since = DayFilter(field_name="created_at", label="Since")
    until = DayFilter(field_name="created_at", end=True, label="Until")
    field_order = (
        "guardrail",
        "severity",
        "action",
        "state",
        "mode",
        "agent",
        "evaluation",
        "flow",
        "queue",
        "assignee",
        "since",
        "until",
    )
    widget_attrs = {
        "agent": {"placeholder": "any agent"},
        "flow": {"placeholder": "any flow"},
        "evaluation": {"placeholder": "any run"},
    }

    class Meta(ViolationFilter.Meta):
        form = PageFilterForm

    def __init__(
        self,
        data: Any = None,
        *args: Any,
        guardrails: list[tuple[str, str]],
        queues: list[tuple[str, str]] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(data, *args, **kwargs)
        self.filters["guardrail"].extra["choices"] = guardrails
        self.filters["queue"].extra["choices"] = queues or []


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
