"""The forms of the review, evaluation and upload pages: the review forms, then the new-run
and upload forms. (The list pages' filter bars are FilterSets' forms: traces/filters.py.)
"""

from __future__ import annotations

from typing import Any

from django import forms

from guardrails.engine.types import Issue
from guardrails.models import Guardrail
from traces.filters import SELECTION_ERRORS, run_selection, selection_filters
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
        self.selection = run_selection({name: given.get(name) for name in SELECTION_ERRORS}, tenant)

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
