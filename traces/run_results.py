"""A run's results one at a time, and two runs compared: what the run page's counts open.

The results are paged by a keyset on (status, id), filtered by guardrail or not: each
page reads one range of the index `result_run_status_key` or `result_run_guardrail_key`,
so the last page of a run of a million results costs what its first page costs.

Two runs are compared per guardrail they share, over the traces both evaluated for it:
a trace *newly fails* when it fails in the run and did not fail in the other, and *no
longer fails* the other way round. A run that stored no skipped results (before skip
reasons were kept) evaluated only the traces it has rows for.
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass, field
from typing import Any

from django.db.models import Exists, OuterRef, Q, QuerySet

from traces.models import Evaluation, EvaluationResult

STATUSES = ("error", "fail", "pass", "skipped")
PAGE_SIZE = 50
MAX_PAGE_SIZE = 500
COMPARE_LISTED = 50


class BadCursor(ValueError):
    """A cursor that is not one this module wrote."""


# ---------------------------------------------------------------------------- results


@dataclass
class ResultPage:
    rows: list[EvaluationResult]
    next_cursor: str | None


def encode_cursor(row: EvaluationResult) -> str:
    return base64.urlsafe_b64encode(f"{row.status}|{row.pk}".encode()).decode()


def decode_cursor(raw: str) -> tuple[str, int]:
    try:
        status, pk = base64.urlsafe_b64decode(raw.encode()).decode().split("|")
        if status not in STATUSES:
            raise ValueError(status)
        return status, int(pk)
    except (ValueError, binascii.Error, UnicodeDecodeError):
        raise BadCursor("the cursor is not one this list gave") from None


def run_results(run: Evaluation, *, guardrail: str = "", status: str = "") -> QuerySet[EvaluationResult]:
    """The run's results, filtered by guardrail id and status, in keyset order."""
    results = EvaluationResult.objects.filter(evaluation=run)
    if guardrail:
        # The run's own revision names the guardrail's key: an equality on the index.
        pks = list(run.revisions.filter(guardrail__guardrail_id=guardrail).values_list("guardrail_id", flat=True))
        results = results.filter(guardrail_id=pks[0]) if pks else results.none()
    if status:
        results = results.filter(status=status)
    return results.order_by("status", "pk")


def results_page(results: QuerySet[EvaluationResult], *, after: str | None, size: int = PAGE_SIZE) -> ResultPage:
    """One page of `results` (from run_results) after the cursor; BadCursor for a bad one."""
    if after:
        status, pk = decode_cursor(after)
        results = results.filter(Q(status__gt=status) | Q(status=status, pk__gt=pk))
    rows = list(
        results.select_related("trace", "guardrail", "revision", "violation")
        .only("pk", "status", "reason", "skip_reason", "mode", "duration_ms", "created_at",
              "trace__trace_id", "guardrail__guardrail_id", "revision__number", "revision__document",
              "violation__id", "violation__state")[: size + 1]
    )
    more = len(rows) > size
    rows = rows[:size]
    return ResultPage(rows, encode_cursor(rows[-1]) if more else None)


def result_as_dict(result: EvaluationResult) -> dict[str, Any]:
    """A result as the API and the page show it: the trace, the guardrail and what it said."""
    document = result.revision.document
    violation = getattr(result, "violation", None)
    return {
        "id": result.pk,
        "trace": result.trace.trace_id,
        "traceUrl": f"/traces/{result.trace_id}/",
        "guardrail": result.guardrail.guardrail_id,
        "revision": result.revision.number,
        "status": result.status,
        "reason": result.reason,
        "skipReason": result.skip_reason or None,
        "action": str(document.get("action", {}).get("on-violation", "")),
        "severity": document.get("severity"),
        "violation": violation.pk if violation is not None else None,
        "reviewState": violation.state if violation is not None else None,
    }


# ---------------------------------------------------------------------------- compare


@dataclass
class GuardrailComparison:
    """One shared guardrail in two runs: failures in each, and which traces changed."""

    guardrail: str
    revision: int | None
    other_revision: int | None
    failing: int = 0
    other_failing: int = 0
    newly_failing: int = 0
    no_longer_failing: int = 0
    newly_failing_traces: list[dict[str, Any]] = field(default_factory=list)
    no_longer_failing_traces: list[dict[str, Any]] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {
            "guardrail": self.guardrail, "revision": self.revision, "withRevision": self.other_revision,
            "failing": self.failing, "withFailing": self.other_failing,
            "newlyFailing": self.newly_failing, "noLongerFailing": self.no_longer_failing,
            "newlyFailingTraces": self.newly_failing_traces,
            "noLongerFailingTraces": self.no_longer_failing_traces,
        }


def previous_run(run: Evaluation) -> Evaluation | None:
    """The tenant's latest run before `run` that evaluated one of its guardrails."""
    guardrails = run.revisions.values("guardrail_id")
    return (
        Evaluation.objects.filter(tenant_id=run.tenant_id, pk__lt=run.pk, revisions__guardrail_id__in=guardrails)
        .order_by("-pk").first()
    )


def shared_guardrails(run: Evaluation, other: Evaluation) -> list[tuple[int, str, int | None, int | None]]:
    """(guardrail pk, id, revision in run, revision in other) of each guardrail both runs evaluated."""
    mine = {r.guardrail_id: r for r in run.revisions.select_related("guardrail")}
    theirs = {r.guardrail_id: r.number for r in other.revisions.all()}
    return sorted(
        ((pk, rev.guardrail.guardrail_id, rev.number, theirs[pk]) for pk, rev in mine.items() if pk in theirs),
        key=lambda item: item[1],
    )


def compare_runs(run: Evaluation, other: Evaluation, *, listed: int = COMPARE_LISTED) -> list[GuardrailComparison]:
    """Per shared guardrail: failures in each run, newly and no longer failing traces
    (counted, and the first `listed` of each)."""
    return [
        _compare_one(run, other, pk, name, revision, other_revision, listed)
        for pk, name, revision, other_revision in shared_guardrails(run, other)
    ]


def _compare_one(
    run: Evaluation, other: Evaluation, guardrail_pk: int, name: str,
    revision: int | None, other_revision: int | None, listed: int,
) -> GuardrailComparison:
    mine = EvaluationResult.objects.filter(evaluation=run, guardrail_id=guardrail_pk)
    theirs = EvaluationResult.objects.filter(evaluation=other, guardrail_id=guardrail_pk)
    newly = _changed(mine, theirs)
    gone = _changed(theirs, mine)
    return GuardrailComparison(
        guardrail=name, revision=revision, other_revision=other_revision,
        failing=mine.filter(status="fail").count(), other_failing=theirs.filter(status="fail").count(),
        newly_failing=newly.count(), no_longer_failing=gone.count(),
        newly_failing_traces=_listed(newly, listed), no_longer_failing_traces=_listed(gone, listed),
    )


def _changed(
    failing_in: QuerySet[EvaluationResult], passing_in: QuerySet[EvaluationResult]
) -> QuerySet[EvaluationResult]:
    """Failures of `failing_in` whose trace the other side evaluated without a failure."""
    not_failing = passing_in.filter(trace_id=OuterRef("trace_id")).exclude(status="fail")
    return failing_in.filter(status="fail").filter(Exists(not_failing))


def _listed(results: QuerySet[EvaluationResult], limit: int) -> list[dict[str, Any]]:
    rows = results.order_by("pk").values("trace_id", "trace__trace_id", "reason")[:limit]
    return [{"trace": row["trace__trace_id"], "traceUrl": f"/traces/{row['trace_id']}/", "reason": row["reason"]}
            for row in rows]
