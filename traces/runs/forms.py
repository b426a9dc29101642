"""The new-run form of the evaluation pages."""

from __future__ import annotations

from datetime import date, timedelta
from typing import Any

from django import forms
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from guardrails.engine.types import Issue
from guardrails.models import Guardrail
from kindgi_console.filters import day_start
from traces.store.filters import SELECTION_ERRORS, run_selection, selection_filters

#: The page's trace dates: whole days of the console's time zone, as the violations page's
#: filter takes them (`from` the start of its day, `to` up to the end of its day).
DAY_FIELDS = ("since", "until")


class EvaluationForm(forms.Form):
    """A new run: guardrails (none ticked: every enabled one), the trace selection
    (`selection`, a `RunTraceFilter`, as the API checks it), the mode."""

    guardrails = forms.ModelMultipleChoiceField(
        queryset=Guardrail.objects.live().order_by("guardrail_id"),
        to_field_name="guardrail_id",
        required=False,
        widget=forms.CheckboxSelectMultiple,
        help_text="None ticked: every enabled guardrail, at its current revision.",
    )
    mode = forms.ChoiceField(
        choices=[("ci", "ci: as the CI command does"), ("runtime", "runtime: as at the runtime")],
        initial="ci",
        widget=forms.RadioSelect,
    )

    def __init__(self, data: Any = None, *args: Any, tenant: Any = None, **kwargs: Any) -> None:
        super().__init__(data, *args, **kwargs)
        field = self.fields["guardrails"]
        assert isinstance(field, forms.ModelMultipleChoiceField)
        tenant_id = tenant.pk if tenant is not None else None
        field.queryset = Guardrail.objects.live().applying_to(tenant_id).order_by("guardrail_id")
        # The trace selection is the API's: the FilterSet a run selects with, its checks and
        # its messages, each at its field (agent, flow, since, until, upload).
        given = data if data is not None else self.initial
        values = {name: given.get(name) for name in SELECTION_ERRORS}
        #: What the date pickers show: a day, or None where the value is a time within a day
        #: (a link's exact `since`), which then shows as text.
        self.days = {name: as_day(name, values[name]) for name in DAY_FIELDS}
        for name in DAY_FIELDS:
            values[name] = day_bound(name, values[name])
        self.selection = run_selection(values, tenant)

    def is_valid(self) -> bool:
        valid = super().is_valid()
        return self.selection.is_valid() and valid

    def filters(self) -> dict[str, Any]:
        """The run's filters, as the API stores them (the selection is valid)."""
        return selection_filters(self.selection)

    def add_issues(self, issues: list[Issue]) -> None:
        """A refused run's issues: a filter's at its field, the others above the form."""
        for issue in issues:
            name = issue.path.removeprefix("/filters/")
            if name in SELECTION_ERRORS:
                self.selection.form.add_error(name, issue.message)
            else:
                self.add_error(None, issue.message)


def parse_day(raw: object) -> date | None:
    """A date picker's value (YYYY-MM-DD), or None for anything else."""
    if not isinstance(raw, str) or len(raw) != 10:
        return None
    try:
        return date.fromisoformat(raw)
    except ValueError:
        return None


def day_bound(name: str, raw: Any) -> Any:
    """A picked day as the selection's time: `since` its first instant, `until` the first
    instant of the next day (the day is included); any other value as given."""
    day = parse_day(raw)
    if day is None:
        return raw
    try:
        return day_start(day + timedelta(days=1) if name == "until" else day).isoformat()
    except OverflowError:  # the day after 9999-12-31: the selection refuses it at its field
        return raw


def as_day(name: str, raw: Any) -> str | None:
    """The day a picker shows for the value: a picked day as it is, a time at the start of a
    day of the console's time zone as that day (`until`: the day before), else None."""
    if raw in (None, ""):
        return ""
    if parse_day(raw) is not None:
        return str(raw)
    try:
        moment = parse_datetime(raw) if isinstance(raw, str) else None
        local = timezone.localtime(moment) if moment is not None and moment.tzinfo is not None else None
    except (ValueError, OverflowError):  # the selection says why at its field
        local = None
    if local is None:
        return None
    if (local.hour, local.minute, local.second, local.microsecond) != (0, 0, 0, 0):
        return None
    return (local.date() - timedelta(days=1) if name == "until" else local.date()).isoformat()
