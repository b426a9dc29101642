"""A run's results one at a time, and two runs compared: what the run page's counts open.

The results are paged by a keyset on (status, id), filtered by guardrail or not: each
page reads one range of the index `result_run_status_key` or `result_run_guardrail_key`,
so the last page of a run of a million results costs what its first page costs.

Two runs are compared per guardrail they share (`traces.comparisons`): the run compared
with by default, and the guardrails both evaluated, are found here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db.models import QuerySet

from kindgi_console import paging
from kindgi_console.paging import BadCursor
from traces.models import Evaluation, EvaluationResult

STATUSES = ("error", "fail", "pass", "skipped")
PAGE_SIZE = 50
MAX_PAGE_SIZE = 500


# ---------------------------------------------------------------------------- results


@dataclass
class ResultPage:
    rows: list[EvaluationResult]
    next_cursor: str | None


def decode_cursor(raw: str) -> tuple[str, int]:
    """The (status, id) of a results cursor; BadCursor for one this list did not give."""
    try:
        position = paging.decode_text(raw)
    except paging.BadCursor:
        position = ("", 0)
    if position[0] not in STATUSES:
        raise BadCursor("the cursor is not one this list gave")
    return position


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
        results = results.filter(paging.past("status", decode_cursor(after), "gt"))
    rows = list(
        results.select_related("trace", "guardrail", "revision", "violation").only(
            "pk",
            "status",
            "reason",
            "skip_reason",
            "mode",
            "duration_ms",
            "created_at",
            "trace__trace_id",
            "guardrail__guardrail_id",
            "revision__number",
            "revision__document",
            "violation__id",
            "violation__state",
        )[: size + 1]
    )
    more = len(rows) > size
    rows = rows[:size]
    return ResultPage(rows, paging.encode(rows[-1], "status") if more else None)


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


def previous_run(run: Evaluation) -> Evaluation | None:
    """The tenant's latest run before `run` that evaluated one of its guardrails."""
    guardrails = run.revisions.values("guardrail_id")
    return (
        Evaluation.objects.filter(tenant_id=run.tenant_id, pk__lt=run.pk, revisions__guardrail_id__in=guardrails)
        .order_by("-pk")
        .first()
    )


def shared_guardrails(run: Evaluation, other: Evaluation) -> list[tuple[int, str, int | None, int | None]]:
    """(guardrail pk, id, revision in run, revision in other) of each guardrail both runs evaluated."""
    mine = {r.guardrail_id: r for r in run.revisions.select_related("guardrail")}
    theirs = {r.guardrail_id: r.number for r in other.revisions.all()}
    return sorted(
        ((pk, rev.guardrail.guardrail_id, rev.number, theirs[pk]) for pk, rev in mine.items() if pk in theirs),
        key=lambda item: item[1],
    )
