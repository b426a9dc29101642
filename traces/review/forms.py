"""The review form of the violation pages. (The list pages' filter bars are FilterSets' forms:
traces/store/filters.py.)
"""

from __future__ import annotations

from django import forms

from traces.review.workflow import MAX_NOTE, STATES


class ReviewForm(forms.Form):
    """One violation's review: the new state and a note."""

    state = forms.ChoiceField(choices=[(s, s) for s in STATES])
    note = forms.CharField(
        required=False,
        max_length=MAX_NOTE,
        widget=forms.Textarea(attrs={"rows": 3, "placeholder": "Why (shown in the history)"}),
    )
