"""A guardrail's labelled set: the stored traces people said it should pass or fail.

The set is a guardrail's regression set: Preview impact measures a draft on it
(traces.runs.preview_labels), `GET guardrails/{id}/labelled-set` exports it as JSON Lines for
`guardrail_ci --labels` (guardrails.engine.labelled reads the records), and the guardrail's
page links the export. Two kinds of label make it, of any revision of the guardrail:

- **calibration labels**: a trace of one of its calibration samples labelled `pass` or `fail`
  (the item's label: its first labeller's, the one the guardrail is measured against);
- **review verdicts** on its violations: a violation reviewers confirmed (`acknowledged` or
  `resolved`) should fail; one marked `false-positive` should pass. An `open` violation is no
  label. This is how the reviewed precision reads reviews (traces.review.quality).

One label per trace: a calibration label before a review (it is a person's pass or fail of the
trace itself, where a review is of a finding), and of each kind the newest. Both come from the
database already one per trace, newest first, so that the export streams in bounded memory.
Always of the querysets given: the caller scopes them to the tenants it may read.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db.models import Exists, F, OuterRef, Q, QuerySet
from django.db.models.functions import Coalesce

from guardrails.models import Guardrail
from traces.models import CalibrationItem, RunTrace, Violation

#: The review states that confirm a violation (the trace should fail), and the one that
#: overturns it (it should pass).
CONFIRMED = (Violation.State.ACKNOWLEDGED, Violation.State.RESOLVED)
OVERTURNED = Violation.State.FALSE_POSITIVE
#: Rows read from the database at a time while streaming (each holds its trace's document).
CHUNK = 200


@dataclass(frozen=True)
class Label:
    """One labelled trace of a guardrail."""

    trace_pk: int
    expected: str
    source: str
    labelled_by: str
    labelled_at: datetime | None
    revision: int
    tenant_id: int
    #: The trace's document, its id and its tenant's slug, when read with them (`with_documents`).
    document: Any = None
    trace_id: str = ""
    tenant: str = ""


def calibration_labels(items: QuerySet[CalibrationItem], guardrail: Guardrail) -> QuerySet[CalibrationItem]:
    """The guardrail's labelled calibration items, the newest per trace, newest first."""
    labelled = items.filter(sample__guardrail=guardrail).exclude(label="")
    newer = CalibrationItem.objects.filter(sample__guardrail=guardrail, trace=OuterRef("trace")).exclude(label="")
    newer = newer.filter(
        Q(labelled_at__gt=OuterRef("labelled_at")) | Q(labelled_at=OuterRef("labelled_at"), pk__gt=OuterRef("pk"))
    )
    return labelled.filter(~Exists(newer)).order_by(F("labelled_at").desc(nulls_last=True), "-pk")


def review_labels(violations: QuerySet[Violation], guardrail: Guardrail) -> QuerySet[Violation]:
    """The guardrail's reviewed violations of traces without a calibration label, the newest
    review per trace, newest first (`at`: when reviewed)."""
    reviewed = violations.filter(guardrail=guardrail, state__in=[*CONFIRMED, OVERTURNED])
    reviewed = reviewed.annotate(at=Coalesce("reviewed_at", "created_at"))
    calibrated = CalibrationItem.objects.filter(sample__guardrail=guardrail, trace=OuterRef("trace")).exclude(label="")
    newer = Violation.objects.filter(
        guardrail=guardrail, trace=OuterRef("trace"), state__in=[*CONFIRMED, OVERTURNED]
    ).annotate(at=Coalesce("reviewed_at", "created_at"))
    newer = newer.filter(Q(at__gt=OuterRef("at")) | Q(at=OuterRef("at"), pk__gt=OuterRef("pk")))
    return reviewed.filter(~Exists(calibrated), ~Exists(newer)).order_by("-at", "-pk")


def count(items: QuerySet[CalibrationItem], violations: QuerySet[Violation], guardrail: Guardrail) -> int:
    """How many traces the guardrail's labelled set holds (two counting queries)."""
    return calibration_labels(items, guardrail).count() + review_labels(violations, guardrail).count()


def labels(
    items: QuerySet[CalibrationItem],
    violations: QuerySet[Violation],
    guardrail: Guardrail,
    *,
    limit: int | None = None,
    with_documents: bool = False,
) -> Iterator[Label]:
    """The labelled set, newest label first (at most `limit`), read CHUNK rows at a time."""
    calibrated = calibration_labels(items, guardrail).select_related("sample__revision").defer("judge_reason")
    reviewed = review_labels(violations, guardrail).select_related("revision")
    if with_documents:
        calibrated = calibrated.select_related("trace", "tenant")
        reviewed = reviewed.select_related("trace", "tenant")
    if limit is not None:
        calibrated, reviewed = calibrated[:limit], reviewed[:limit]
    merged = heapq.merge(
        (_from_item(item, with_documents) for item in calibrated.iterator(chunk_size=CHUNK)),
        (_from_violation(violation, with_documents) for violation in reviewed.iterator(chunk_size=CHUNK)),
        key=_newest_first,
    )
    for given, label in enumerate(merged):
        if limit is not None and given >= limit:
            return
        yield label


def _newest_first(label: Label) -> float:
    return -label.labelled_at.timestamp() if label.labelled_at is not None else float("inf")


def _from_item(item: CalibrationItem, with_documents: bool) -> Label:
    return Label(
        trace_pk=item.trace_id,
        expected=item.label,
        source="calibration",
        labelled_by=item.labelled_by_label,
        labelled_at=item.labelled_at,
        revision=item.sample.revision.number,
        tenant_id=item.tenant_id,
        **(_documented(item.trace, item.tenant.slug) if with_documents else {}),
    )


def _from_violation(violation: Violation, with_documents: bool) -> Label:
    return Label(
        trace_pk=violation.trace_id,
        expected="pass" if violation.state == OVERTURNED else "fail",
        source="review",
        labelled_by=violation.reviewed_by_label,
        labelled_at=violation.reviewed_at or violation.created_at,
        revision=violation.revision.number,
        tenant_id=violation.tenant_id,
        **(_documented(violation.trace, violation.tenant.slug) if with_documents else {}),
    )


def _documented(trace: RunTrace, tenant: str) -> dict[str, Any]:
    return {"document": trace.document, "trace_id": trace.trace_id, "tenant": tenant}


def record(label: Label, guardrail: Guardrail) -> dict[str, Any]:
    """The export's record of a label read `with_documents` (guardrails.engine.labelled
    describes it)."""
    return {
        "guardrail": guardrail.guardrail_id,
        "expected": label.expected,
        "trace": label.document,
        "source": label.source,
        "labelledBy": label.labelled_by,
        "labelledAt": None if label.labelled_at is None else label.labelled_at.isoformat(),
        "revision": label.revision,
        "tenant": label.tenant,
    }
