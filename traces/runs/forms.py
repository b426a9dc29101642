"""The new-run form of the evaluation pages."""

from __future__ import annotations

from typing import Any

from django import forms

from guardrails.engine.types import Issue
from guardrails.models import Guardrail
from traces.store.filters import SELECTION_ERRORS, run_selection, selection_filters


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
