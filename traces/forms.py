"""The forms of the trace, violation, ledger, evaluation and upload pages.

The filter bar's form (the trace and violation pages' FilterSets in traces/filters.py use
it; the ledger's filter form is its own, for its tenant and grouping choices) and the review
forms, then the new-run and upload forms.

An invalid filter value is shown at its field and that filter is left out, never a server
error. Dates are whole days: `since` is from the start of that day, `until` up to its end.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django import forms
from django.db.models import Q, QuerySet

from guardrails.models import Guardrail
from kindgi_console.filters import PageFilterForm, day_start
from traces.review import MAX_NOTE, STATES
from traces.uploads import ACCEPTED_SUFFIXES


class FilterForm(PageFilterForm):
    """A GET form whose valid fields narrow a queryset."""

    since = forms.DateField(required=False, widget=forms.DateInput(attrs={"type": "date"}))
    until = forms.DateField(required=False, widget=forms.DateInput(attrs={"type": "date"}))
    time_field = "created_at"

    def time_range(self) -> Q:
        condition = Q()
        if self.value("since"):
            condition &= Q(**{f"{self.time_field}__gte": day_start(self.value("since"))})
        if self.value("until"):
            end = day_start(self.value("until") + timedelta(days=1))
            condition &= Q(**{f"{self.time_field}__lt": end})
        return condition

    def day_range(self, field: str = "day") -> Q:
        """The dates as `time_range` has them, on a date field (a daily roll-up's day)."""
        condition = Q()
        if self.value("since"):
            condition &= Q(**{f"{field}__gte": self.value("since")})
        if self.value("until"):
            condition &= Q(**{f"{field}__lte": self.value("until")})
        return condition


def _choices(values: tuple[str, ...] | list[tuple[str, str]], any_label: str = "Any") -> list[tuple[str, str]]:
    pairs = [(v, v) if isinstance(v, str) else v for v in values]
    return [("", any_label), *pairs]


LEDGER_GROUPS = [("guardrail", "Guardrail"), ("model", "Model"), ("tenant", "Tenant"), ("day", "Day")]
ALL_TENANTS = "*"


class LedgerFilterForm(FilterForm):
    guardrail = forms.ChoiceField(required=False)
    tenant = forms.ChoiceField(required=False)
    model = forms.CharField(required=False, max_length=200)
    group = forms.ChoiceField(required=False, choices=LEDGER_GROUPS)

    def __init__(
        self, data: Any, *, guardrails: list[tuple[str, str]], tenants: list[tuple[str, str]], **kwargs: Any
    ) -> None:
        super().__init__(data, **kwargs)
        self.fields["guardrail"].choices = _choices(guardrails)  # type: ignore[attr-defined]
        self.fields["tenant"].choices = [  # type: ignore[attr-defined]
            ("", "Current tenant"),
            (ALL_TENANTS, "All my tenants"),
            *tenants,
        ]

    @property
    def grouping(self) -> str:
        """What the sums are grouped by (guardrail unless the page asks otherwise)."""
        return self.value("group") or "guardrail"

    def apply(self, entries: QuerySet[Any], current_tenant: Any, *, days: bool = False) -> QuerySet[Any]:
        """`entries` narrowed by the filter; `days`: they are the daily roll-up's rows."""
        entries = entries.filter(self.day_range() if days else self.time_range())
        tenant = self.value("tenant")
        if tenant == ALL_TENANTS:
            pass
        elif tenant:
            entries = entries.filter(tenant__slug=tenant)
        else:
            entries = entries.filter(tenant=current_tenant)
        if self.value("guardrail"):
            entries = entries.filter(guardrail__guardrail_id=self.value("guardrail"))
        if self.value("model"):
            entries = entries.filter(model_id=self.value("model"))
        return entries


class ReviewForm(forms.Form):
    """One violation's review: the new state and a note."""

    state = forms.ChoiceField(choices=[(s, s) for s in STATES])
    note = forms.CharField(
        required=False,
        max_length=MAX_NOTE,
        widget=forms.Textarea(attrs={"rows": 3, "placeholder": "Why (shown in the history)"}),
    )


class EvaluationForm(forms.Form):
    """A new run: guardrails (none ticked: every enabled one), the trace selection, the mode."""

    guardrails = forms.ModelMultipleChoiceField(
        queryset=Guardrail.objects.live().order_by("guardrail_id"),
        to_field_name="guardrail_id",
        required=False,
        widget=forms.CheckboxSelectMultiple,
        help_text="None ticked: every enabled guardrail, at its current revision.",
    )
    agent = forms.CharField(required=False, max_length=200)
    flow = forms.CharField(required=False, max_length=200)
    since = forms.DateTimeField(required=False, help_text="Received at or after (UTC), e.g. 2026-11-29 10:00")
    until = forms.DateTimeField(required=False, help_text="Received before (UTC)")
    upload = forms.IntegerField(required=False, min_value=1, widget=forms.HiddenInput)
    mode = forms.ChoiceField(
        choices=[("ci", "ci: as the CI command does"), ("runtime", "runtime: as at the runtime")],
        initial="ci",
        widget=forms.RadioSelect,
    )

    def __init__(self, *args: Any, tenant: Any = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        field = self.fields["guardrails"]
        assert isinstance(field, forms.ModelMultipleChoiceField)
        tenant_id = tenant.pk if tenant is not None else None
        field.queryset = Guardrail.objects.live().applying_to(tenant_id).order_by("guardrail_id")

    def filters(self) -> dict[str, Any]:
        data = self.cleaned_data
        filters: dict[str, Any] = {name: data[name] for name in ("agent", "flow", "upload") if data.get(name)}
        for name in ("since", "until"):
            if data.get(name):
                filters[name] = data[name].isoformat()
        return filters


class UploadForm(forms.Form):
    """A file of traces for one of the tenants the person may write to."""

    file = forms.FileField(help_text=".json (one trace or an array), .jsonl (one trace a line), either may be .gz")
    tenant = forms.ChoiceField()
    evaluate_after = forms.BooleanField(
        required=False, label="Start an evaluation of these traces when the upload is processed"
    )

    def __init__(self, *args: Any, tenants: list[Any], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.tenants = {tenant.slug: tenant for tenant in tenants}
        field = self.fields["tenant"]
        assert isinstance(field, forms.ChoiceField)
        field.choices = [(t.slug, t.name or t.slug) for t in tenants]

    def clean_file(self) -> Any:
        file = self.cleaned_data["file"]
        if not file.name.lower().endswith(ACCEPTED_SUFFIXES):
            raise forms.ValidationError("Upload a .json, .jsonl or .gz file of traces.")
        return file

    def clean_tenant(self) -> Any:
        return self.tenants[self.cleaned_data["tenant"]]
