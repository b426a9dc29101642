"""Preview impact on the guardrail's labelled set: how the draft does against what people said.

Beside the selection's newly and no longer failing traces, a preview evaluates the draft and
the revision it is compared with on the guardrail's labelled set in the preview's tenant
(traces.store.labelled_set: calibration labels and reviewed violations), the newest
LABELLED_MAX labels of it: a large set is cut, and the preview says so (`total` beside
`evaluated`). For each of the two: precision and recall on the set with their 95% Wilson
intervals, and the cases it gets wrong (guardrails.engine.labelled, the rules `guardrail_ci
--labels` applies); the first PREVIEW_LISTED traces the draft gets wrong are listed, each
saying whether the revision it is compared with got it right (`newly` wrong).
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from guardrails.engine.labelled import Confusion, is_wrong
from guardrails.engine.types import Result
from traces.models import CalibrationItem, GuardrailPreview, RunTrace, Violation
from traces.store import labelled_set
from traces.store.labelled_set import Label

#: The labels of a guardrail a preview evaluates at most: the newest ones.
LABELLED_MAX = 1000
#: The wrong cases a preview lists.
LISTED = 200


def preview_labels(preview: GuardrailPreview) -> tuple[list[Label], int]:
    """The newest LABELLED_MAX labels of the previewed guardrail in the preview's tenant, and
    how many it has in all (none for a new guardrail)."""
    if preview.current is None:
        return [], 0
    guardrail = preview.current.guardrail
    items = CalibrationItem.objects.filter(tenant=preview.tenant)
    violations = Violation.objects.filter(tenant=preview.tenant)
    labels = list(labelled_set.labels(items, violations, guardrail, limit=LABELLED_MAX))
    total = len(labels) if len(labels) < LABELLED_MAX else labelled_set.count(items, violations, guardrail)
    return labels, total


class LabelledTally:
    """The draft and the compared revision against the labels, counted as a preview goes."""

    def __init__(self, labels: list[Label], total: int, compared: bool) -> None:
        self.labels = {label.trace_pk: label for label in labels}
        self.total = total
        self.draft = Confusion()
        self.current: Confusion | None = Confusion() if compared else None
        self.newly_wrong = 0
        self.no_longer_wrong = 0
        self.wrong: list[dict[str, Any]] = []
        self.cost = Decimal(0)
        self.seen_in_batch = 0
        self.unreachable_in_a_row = 0

    def add(self, trace: RunTrace, after: Result, before: Result | None) -> None:
        label = self.labels[trace.pk]
        wrong_now = self.draft.add(label.expected, after.status)
        wrong_before = (
            self.current is not None and before is not None and self.current.add(label.expected, before.status)
        )
        self.newly_wrong += wrong_now and not wrong_before
        self.no_longer_wrong += wrong_before and not wrong_now
        if wrong_now and len(self.wrong) < LISTED:
            self.wrong.append(_wrong_case(trace, label, after, before))
        for result in (after, before):
            if result is not None and result.details.get("costUsd"):
                self.cost += Decimal(str(result.details["costUsd"]))

    def as_dict(self) -> dict[str, Any]:
        """What the preview keeps (`changes["labelled_set"]`) and its API answer shows."""
        return {
            "total": self.total,
            "evaluated": self.draft.labelled,
            "limit": LABELLED_MAX,
            "capped": self.total > LABELLED_MAX,
            "draft": self.draft.as_dict(),
            "current": None if self.current is None else self.current.as_dict(),
            "newlyWrong": self.newly_wrong,
            "noLongerWrong": self.no_longer_wrong,
            "wrong": self.wrong,
            "listed": LISTED,
        }


def _wrong_case(trace: RunTrace, label: Label, after: Result, before: Result | None) -> dict[str, Any]:
    return {
        "trace": trace.trace_id,
        "traceUrl": f"/traces/{trace.pk}/",
        "expected": label.expected,
        "now": after.status,
        "before": before.status if before is not None else None,
        "newly": before is not None and not is_wrong(label.expected, before.status),
        "reason": after.reason or "",
        "source": label.source,
        "labelledBy": label.labelled_by,
    }
