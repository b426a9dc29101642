"""Two runs compared, per guardrail both evaluated: computed once in the background, then read.

Over the traces both runs evaluated for a guardrail, a trace *newly fails* when it fails in
the run and did not fail in the other, and *no longer fails* the other way round. A run
that stored no skipped results (before skip reasons were kept) evaluated only the traces it
has rows for.

Counting those means reading every failure of both runs, so it is not done while a page or
the API waits: `comparison_for` finds the kept `RunComparison` of two finished runs, or
records a queued one and sends `traces.tasks.compare_runs`; `compute` (the task) counts per
guardrail, keeps each changed trace as a `ComparisonChange`, and writes its progress to the
row, which the page and the API show as "computing" like a run. What they read afterwards
is the figures and one keyset page of changed traces per list: the same few queries for
runs of ten thousand results or of a million.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import IntegrityError, connection, transaction
from django.utils import timezone
from kombu.exceptions import OperationalError as BrokerError

from kindgi_console import paging, tasking
from kindgi_console.paging import BadCursor
from traces.models import ComparisonChange, Evaluation, EvaluationResult, RunComparison, RunTrace
from traces.runs.run_results import shared_guardrails

logger = logging.getLogger(__name__)

Kind = ComparisonChange.Kind
#: Traces of each list shown with the figures; the rest page by a cursor.
LISTED = 50
MAX_LISTED = 500
#: A comparison still queued after this long is sent again (its message was lost).
RESEND_AFTER = timedelta(minutes=1)


# ---------------------------------------------------------------------------- starting


def comparison_for(run: Evaluation, other: Evaluation) -> RunComparison | None:
    """The comparison of two runs of a tenant, sent to be computed if it is new (or failed,
    or its message was lost); None while either run has not finished."""
    if not (run.is_final and other.is_final):
        return None
    try:
        comparison, created = RunComparison.objects.get_or_create(
            evaluation=run, other=other, defaults={"tenant_id": run.tenant_id}
        )
    except IntegrityError:  # two first requests at once: the other one's row
        comparison, created = RunComparison.objects.get(evaluation=run, other=other), False
    if created or _needs_sending(comparison):
        RunComparison.objects.filter(pk=comparison.pk).update(
            status=RunComparison.Status.QUEUED, created_at=timezone.now(), error=""
        )
        send(comparison.pk)
        comparison.refresh_from_db()
    return comparison


def _needs_sending(comparison: RunComparison) -> bool:
    """Failed, queued for long (its message lost), or running for longer than a task may
    run (its worker lost: the task's time limit has killed any that was still going)."""
    now = timezone.now()
    if comparison.status == RunComparison.Status.FAILED:
        return True
    if comparison.status == RunComparison.Status.QUEUED:
        return comparison.created_at < now - RESEND_AFTER
    lost = now - timedelta(seconds=settings.CELERY_TASK_TIME_LIMIT) - RESEND_AFTER
    return comparison.status == RunComparison.Status.RUNNING and (comparison.started_at or now) < lost


def send(comparison_id: int) -> None:
    try:
        tasking.send("traces.tasks.compare_runs", comparison_id)
    except BrokerError:
        logger.warning("could not send comparison %s; it is sent again when next asked for", comparison_id)


# ---------------------------------------------------------------------------- computing


def compute(comparison_id: int) -> None:
    """Count what changed per shared guardrail, keeping each changed trace; progress on the row.

    Safe to run again (a redelivered message): it starts over from no kept trace.
    """
    comparison = RunComparison.objects.select_related("evaluation", "other").filter(pk=comparison_id).first()
    if comparison is None or comparison.status == RunComparison.Status.SUCCEEDED:
        return
    guardrails = shared_guardrails(comparison.evaluation, comparison.other)
    with transaction.atomic():
        ComparisonChange.objects.filter(comparison=comparison).delete()
        RunComparison.objects.filter(pk=comparison_id).update(
            status=RunComparison.Status.RUNNING,
            started_at=timezone.now(),
            total=len(guardrails),
            done=0,
            guardrails=[],
            error="",
        )
    figures = []
    for pk, name, revision, other_revision in guardrails:
        with transaction.atomic():
            figures.append(_compare_one(comparison, pk, name, revision, other_revision))
            RunComparison.objects.filter(pk=comparison_id).update(done=len(figures), guardrails=figures)
    RunComparison.objects.filter(pk=comparison_id).update(
        status=RunComparison.Status.SUCCEEDED, finished_at=timezone.now()
    )


def fail(comparison_id: int, error: str) -> None:
    RunComparison.objects.filter(pk=comparison_id).update(
        status=RunComparison.Status.FAILED, error=error[:2000], finished_at=timezone.now()
    )


def _compare_one(
    comparison: RunComparison, guardrail_pk: int, name: str, revision: int | None, other_revision: int | None
) -> dict[str, Any]:
    run, other = comparison.evaluation_id, comparison.other_id
    failing = EvaluationResult.objects.filter(evaluation_id=run, guardrail_id=guardrail_pk, status="fail")
    other_failing = EvaluationResult.objects.filter(evaluation_id=other, guardrail_id=guardrail_pk, status="fail")
    return {
        "guardrail": name,
        "key": guardrail_pk,
        "revision": revision,
        "withRevision": other_revision,
        "failing": failing.count(),
        "withFailing": other_failing.count(),
        "newlyFailing": _keep_changed(comparison.pk, guardrail_pk, run, other, Kind.NEWLY_FAILING),
        "noLongerFailing": _keep_changed(comparison.pk, guardrail_pk, other, run, Kind.NO_LONGER_FAILING),
    }


_RESULTS = EvaluationResult._meta.db_table
# One INSERT ... SELECT, so that a hundred thousand changed traces do not travel through
# Python; built from the models' own table names only, values go as parameters.
_KEEP_CHANGED = (
    f"INSERT INTO {ComparisonChange._meta.db_table} (comparison_id, guardrail_id, trace_id, kind, reason) "  # noqa: S608
    f"SELECT %s, f.guardrail_id, f.trace_id, %s, f.reason FROM {_RESULTS} f "
    "WHERE f.evaluation_id = %s AND f.guardrail_id = %s AND f.status = 'fail' "
    f"AND EXISTS (SELECT 1 FROM {_RESULTS} o WHERE o.evaluation_id = %s AND o.guardrail_id = %s "
    "AND o.trace_id = f.trace_id AND o.status <> 'fail') ORDER BY f.id"
)


def _keep_changed(comparison_id: int, guardrail_pk: int, failing_in: int, passing_in: int, kind: str) -> int:
    """Keep the traces that fail in `failing_in` and were evaluated without a failure in
    `passing_in`; returns how many."""
    with connection.cursor() as cursor:
        cursor.execute(_KEEP_CHANGED, [comparison_id, kind, failing_in, guardrail_pk, passing_in, guardrail_pk])
        return int(cursor.rowcount)


# ---------------------------------------------------------------------------- reading


@dataclass
class ChangePage:
    rows: list[dict[str, Any]]
    next_cursor: str | None


def encode_cursor(pk: int) -> str:
    return paging.encode_text("change", pk)


def decode_cursor(raw: str) -> int:
    """The id of a list's cursor; BadCursor for one this list did not give."""
    try:
        label, pk = paging.decode_text(raw)
    except paging.BadCursor:
        label, pk = "", 0
    if label != "change":
        raise BadCursor("the cursor is not one this list gave")
    return pk


def changes_page(
    comparison: RunComparison, guardrail: str, kind: str, *, after: str | None = None, size: int = LISTED
) -> ChangePage:
    """One keyset page of the traces of one list (a guardrail's newly or no longer failing):
    one range of the index `comparison_change_key`, then those traces' ids."""
    guardrail_pk = next((row["key"] for row in comparison.guardrails if row["guardrail"] == guardrail), None)
    if guardrail_pk is None:
        return ChangePage([], None)
    rows = ComparisonChange.objects.filter(comparison=comparison, guardrail_id=guardrail_pk, kind=kind)
    if after:
        rows = rows.filter(pk__gt=decode_cursor(after))
    # No join here: the planner's estimate of a freshly filled list may be far off, and
    # a join could then read the whole list to sort it; the index gives its order.
    found = list(rows.order_by("pk").values_list("pk", "trace_id", "reason")[: size + 1])
    more = len(found) > size
    found = found[:size]
    names = dict(RunTrace.objects.filter(pk__in=[trace for _, trace, _ in found]).values_list("pk", "trace_id"))
    return ChangePage(
        [
            {"trace": names.get(trace, ""), "traceUrl": f"/traces/{trace}/", "reason": reason}
            for _, trace, reason in found
        ],
        encode_cursor(found[-1][0]) if more else None,
    )


def public(figures: dict[str, Any]) -> dict[str, Any]:
    """A guardrail's figures as answered (without the guardrail's row key)."""
    return {name: value for name, value in figures.items() if name != "key"}


def figures_with_traces(comparison: RunComparison, listed: int = LISTED) -> list[dict[str, Any]]:
    """The comparison's figures per guardrail, each with the first page of both lists and
    the cursor of the next (two queries per guardrail, whatever the runs' size)."""
    answer = []
    for figures in comparison.guardrails:
        item = public(figures)
        for kind, key in ((Kind.NEWLY_FAILING, "newlyFailing"), (Kind.NO_LONGER_FAILING, "noLongerFailing")):
            page = changes_page(comparison, figures["guardrail"], kind, size=listed)
            item[f"{key}Traces"], item[f"{key}Cursor"] = page.rows, page.next_cursor
        answer.append(item)
    return answer


def progress(comparison: RunComparison) -> dict[str, Any]:
    return {"done": comparison.done, "total": comparison.total, "percent": comparison.percent}
