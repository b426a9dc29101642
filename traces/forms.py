"""The forms of the review, evaluation and upload pages: the review forms, then the new-run
and upload forms. (The list pages' filter bars are FilterSets' forms: traces/filters.py.)
"""

from __future__ import annotations

from typing import Any

from django import forms

from guardrails.models import Guardrail
from traces.review import MAX_NOTE, STATES
from traces.uploads import ACCEPTED_SUFFIXES


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
