"""The upload form of the upload pages."""

from __future__ import annotations

from typing import Any

from django import forms

from traces.ingest.uploads import ACCEPTED_SUFFIXES


class UploadForm(forms.Form):
    """A file of traces for one of the tenants the person may write to."""

    file = forms.FileField(
        required=False, help_text=".json (one trace or an array), .jsonl (one trace a line), either may be .gz"
    )
    tenant = forms.ChoiceField()
    evaluate_after = forms.BooleanField(
        required=False, label="Start an evaluation of these traces when the upload is processed"
    )

    def __init__(self, *args: Any, tenants: list[Any], held: Any = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # The file kept from a refused try (`traces.ingest.views.HeldFile`): used when none is chosen.
        self.held = held
        self.tenants = {tenant.slug: tenant for tenant in tenants}
        field = self.fields["tenant"]
        assert isinstance(field, forms.ChoiceField)
        field.choices = [(t.slug, t.name or t.slug) for t in tenants]

    def clean_file(self) -> Any:
        file = self.cleaned_data["file"]
        if not file:
            if self.held is None:
                raise forms.ValidationError("Choose a file of traces.")
            return None
        if not file.name.lower().endswith(ACCEPTED_SUFFIXES):
            raise forms.ValidationError("Upload a .json, .jsonl or .gz file of traces.")
        return file

    def clean_tenant(self) -> Any:
        return self.tenants[self.cleaned_data["tenant"]]

    def new_file(self) -> Any:
        """The file chosen in this request, once it passed its own check (None otherwise)."""
        return getattr(self, "cleaned_data", {}).get("file")
