"""A guardrail's labelled set: traces people labelled `pass` or `fail` for it, its regression
set, and how a guardrail's verdicts do against those labels.

The set travels as JSON Lines, one record a line, as the console exports it
(`GET /api/v1/guardrails/{id}/labelled-set`) and `guardrail_ci --labels` reads it:

    {"guardrail": "no-refunds", "expected": "fail", "trace": {...a RunTrace...},
     "source": "calibration", "labelledBy": "bob", "labelledAt": "2026-12-01T09:30:00+00:00",
     "tenant": "acme", "revision": 3}

`guardrail`, `expected` and `trace` are what is read; the others say where the label came from
(`source`: a calibration label, or a review of a violation) and are not checked.

A verdict is **wrong** when it is not the label: `fail` where people said pass (a false
positive), anything but `fail` where they said fail (a false negative: `pass`, or `skipped`
when the guardrail's scope leaves the trace out), and `error` whatever the label (no verdict).
Precision (of the set's traces it fails, the share labelled fail) and recall (of those
labelled fail, the share it fails) are of its pass and fail verdicts, errors left out, each
with its 95% Wilson interval. They are the set's figures, not the traffic's: a set drawn from
reviewed violations holds more fails than the traces do.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from guardrails.engine.schema import MAX_DEPTH, validate_runtrace
from guardrails.engine.statistics import proportion
from guardrails.engine.types import Issue

EXPECTED = ("pass", "fail")
#: The fields a record must have, and what each must be.
REQUIRED = {"guardrail": "a guardrail's id (a string)", "expected": "pass or fail", "trace": "a RunTrace (an object)"}


def record_issues(record: object, max_depth: int = MAX_DEPTH) -> list[Issue]:
    """What is wrong with one record of a labelled set, each issue naming its field (the
    trace's own issues under `/trace`); [] for a record that can be evaluated."""
    if not isinstance(record, Mapping):
        return [Issue("", "a labelled case is an object: {guardrail, expected, trace}")]
    for name, shape in REQUIRED.items():
        if name not in record:
            return [Issue(f"/{name}", f"is required: {shape}")]
    guardrail, expected, trace = record["guardrail"], record["expected"], record["trace"]
    if not isinstance(guardrail, str) or not guardrail:
        return [Issue("/guardrail", "must be a guardrail's id (a non-empty string)")]
    if expected not in EXPECTED:
        return [Issue("/expected", "must be pass or fail")]
    if not isinstance(trace, Mapping):
        return [Issue("/trace", "must be a RunTrace (an object)")]
    issues = validate_runtrace(trace, max_depth=max_depth, json_values=True)
    return [Issue("/trace" + issue.path, issue.message) for issue in issues]


def is_wrong(expected: str, status: str) -> bool:
    """Whether a verdict of `status` is not the label `expected` (see the module's docstring)."""
    return status == "error" or (status == "fail") != (expected == "fail")


@dataclass
class Confusion:
    """A guardrail's verdicts against the labels of a set, counted."""

    true_positives: int = 0
    false_positives: int = 0
    false_negatives: int = 0
    true_negatives: int = 0
    errors: int = 0

    def add(self, expected: str, status: str) -> bool:
        """Count one verdict; whether it is wrong."""
        if status == "error":
            self.errors += 1
        elif status == "fail":
            if expected == "fail":
                self.true_positives += 1
            else:
                self.false_positives += 1
        elif expected == "fail":
            self.false_negatives += 1
        else:
            self.true_negatives += 1
        return is_wrong(expected, status)

    @property
    def labelled(self) -> int:
        return self.true_positives + self.false_positives + self.false_negatives + self.true_negatives + self.errors

    @property
    def wrong(self) -> int:
        return self.false_positives + self.false_negatives + self.errors

    def precision(self) -> dict[str, object]:
        return proportion(self.true_positives, self.true_positives + self.false_positives)

    def recall(self) -> dict[str, object]:
        return proportion(self.true_positives, self.true_positives + self.false_negatives)

    def as_dict(self) -> dict[str, Any]:
        return {
            "labelled": self.labelled,
            "wrong": self.wrong,
            "truePositives": self.true_positives,
            "falsePositives": self.false_positives,
            "falseNegatives": self.false_negatives,
            "trueNegatives": self.true_negatives,
            "errors": self.errors,
            "precision": self.precision(),
            "recall": self.recall(),
        }

    @classmethod
    def from_dict(cls, figures: Mapping[str, Any]) -> Confusion:
        """The counts of `as_dict`'s answer (a stored preview's)."""
        return cls(
            true_positives=int(figures.get("truePositives", 0)),
            false_positives=int(figures.get("falsePositives", 0)),
            false_negatives=int(figures.get("falseNegatives", 0)),
            true_negatives=int(figures.get("trueNegatives", 0)),
            errors=int(figures.get("errors", 0)),
        )
