"""A run's results one at a time: what the run page's counts open.

The results are listed by status, then guardrail, then as stored, and paged by a keyset
on (status, guardrail, id): every page reads one range of the index `result_run_key`
(evaluation, status, guardrail, id), or, filtered by guardrail and not by status, one range
per status (four at most), so the last page of a run of a million results costs what its
first page costs. One index where there were two (by status, by guardrail then status):
a run writes an entry fewer per result.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db.models import Case, CharField, IntegerField, OuterRef, QuerySet, Subquery, When
from django.db.models.fields.tuple_lookups import Tuple, TupleGreaterThan

from kindgi_console import paging
from kindgi_console.paging import BadCursor
from traces.models import Evaluation, EvaluationResult, Violation

STATUSES = ("error", "fail", "pass", "skipped")  # in the order of the database's (and the list's)
ORDER = ("status", "guardrail_id", "pk")
PAGE_SIZE = 50
MAX_PAGE_SIZE = 500


# ---------------------------------------------------------------------------- results


@dataclass
class ResultPage:
    rows: list[EvaluationResult]
    next_cursor: str | None


@dataclass(frozen=True)
class RunResults:
    """A run's results as a list asks for them, in keyset order (`ORDER`)."""

    queryset: QuerySet[EvaluationResult]
    #: Filtered by guardrail and not by status: each status is its own range of the index.
    per_status: bool = False


def decode_cursor(raw: str) -> tuple[str, int, int]:
    """The (status, guardrail key, id) of a results cursor; BadCursor for one this list did not give."""
    try:
        text, pk = paging.decode_text(raw)
        status, _, guardrail = text.partition("/")
        position = (status, paging.decode_key(guardrail), pk)
    except (paging.BadCursor, ValueError):
        position = ("", 0, 0)
    if position[0] not in STATUSES:
        raise BadCursor("the cursor is not one this list gave")
    return position


def encode_cursor(result: EvaluationResult) -> str:
    return paging.encode_text(f"{result.status}/{result.guardrail_id}", result.pk)


def run_results(run: Evaluation, *, guardrail: str = "", status: str = "") -> RunResults:
    """The run's results, filtered by guardrail id and status, in keyset order."""
    results = EvaluationResult.objects.filter(evaluation=run)
    if guardrail:
        # The run's own revision names the guardrail's key: an equality on the index.
        pks = list(run.revisions.filter(guardrail__guardrail_id=guardrail).values_list("guardrail_id", flat=True))
        results = results.filter(guardrail_id=pks[0]) if pks else results.none()
    if status:
        results = results.filter(status=status)
    return RunResults(results.order_by(*ORDER), per_status=bool(guardrail) and not status)


def results_page(results: RunResults, *, after: str | None, size: int = PAGE_SIZE) -> ResultPage:
    """One page of `results` (from run_results) after the cursor; BadCursor for a bad one."""
    position = decode_cursor(after) if after else None
    parts = [results.queryset]
    if results.per_status:
        after_status = position[0] if position is not None else ""
        parts = [results.queryset.filter(status=status) for status in STATUSES if status >= after_status]
    rows: list[EvaluationResult] = []
    for part in parts:
        if position is not None:
            # A row comparison: where the index range starts, not a filter of the rows before.
            part = part.filter(TupleGreaterThan(Tuple(*ORDER), position))
        rows += _page_rows(part, size + 1 - len(rows))
        if len(rows) > size:
            break
    more = len(rows) > size
    rows = rows[:size]
    return ResultPage(rows, encode_cursor(rows[-1]) if more else None)


def finding_violation(column: str, output_field: Any) -> Case:
    """A column of the violation of a result's finding (its trace and revision), for a `fail`
    not in shadow: the one violation of the finding, whichever run or runtime found it first
    (one look-up in the violations' unique key)."""
    found = Violation.objects.filter(trace_id=OuterRef("trace_id"), revision_id=OuterRef("revision_id"))
    return Case(
        When(status=EvaluationResult.Status.FAIL, shadow=False, then=Subquery(found.values(column)[:1])),
        default=None,
        output_field=output_field,
    )


def _page_rows(results: QuerySet[EvaluationResult], count: int) -> list[EvaluationResult]:
    return list(
        results.select_related("trace", "guardrail", "revision")
        .annotate(
            violation_pk=finding_violation("pk", IntegerField()),
            violation_state=finding_violation("state", CharField()),
        )
        .only(
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
        )[:count]
    )


def result_as_dict(result: EvaluationResult) -> dict[str, Any]:
    """A result as the API and the page show it: the trace, the guardrail and what it said."""
    document = result.revision.document
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
        "violation": getattr(result, "violation_pk", None),
        "reviewState": getattr(result, "violation_state", None),
    }
