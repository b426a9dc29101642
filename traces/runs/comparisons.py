"""A run compared with earlier results: computed once in the background, then read.

Each guardrail revision the run evaluated is compared, trace by trace, with the guardrail's
own latest earlier result (from any run or the runtime), or with one run's results when one
is asked for (`with`); what counts as newly failing, no longer failing, still failing and not
compared is said in `traces.runs.comparing`, which computes it.

Counting those means reading every result of the run, so it is not done while a page or the
API waits: `comparison_for` finds the kept `RunComparison` of a finished run (and the run
compared with, if any), or records a queued one and sends `traces.tasks.compare_runs`; the
task counts, keeps each listed trace as a `ComparisonChange`, and writes its progress to the
row, which the page and the API show as "computing" like a run. What they read afterwards
is the figures and one keyset page of traces per list: the same few queries for runs of ten
thousand results or of a million.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import IntegrityError
from django.utils import timezone
from kombu.exceptions import OperationalError as BrokerError

from kindgi_console import paging, tasking
from kindgi_console.paging import BadCursor
from traces.models import ComparisonChange, Evaluation, RunComparison, RunTrace

logger = logging.getLogger(__name__)

Kind = ComparisonChange.Kind
#: The lists of a revision, by kind, as the answers name them.
LISTS = (
    (Kind.NEWLY_FAILING, "newlyFailing"),
    (Kind.NO_LONGER_FAILING, "noLongerFailing"),
    (Kind.STILL_FAILING, "stillFailing"),
)
#: Traces of each list shown with the figures; the rest page by a cursor.
LISTED = 50
MAX_LISTED = 500
#: A comparison still queued after this long is sent again (its message was lost).
RESEND_AFTER = timedelta(minutes=1)


# ---------------------------------------------------------------------------- starting


def comparison_for(run: Evaluation, other: Evaluation | None = None) -> RunComparison | None:
    """The comparison of a run with earlier results (`other`: with that run of the tenant),
    sent to be computed if it is new (or failed, or its message was lost); None while a run
    compared has not finished."""
    if not (run.is_final and (other is None or other.is_final)):
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


def figures_of(comparison: RunComparison, guardrail: str, revision: int | None = None) -> dict[str, Any] | None:
    """The compared revision's figures: of the guardrail id at `revision` (None: its first)."""
    return next(
        (
            row
            for row in comparison.guardrails
            if row["guardrail"] == guardrail
            and row.get("revisionKey") is not None
            and (revision is None or row["revision"] == revision)
        ),
        None,
    )


def changes_page(
    comparison: RunComparison,
    guardrail: str,
    kind: str,
    *,
    revision: int | None = None,
    after: str | None = None,
    size: int = LISTED,
) -> ChangePage:
    """One keyset page of the traces of one list (a revision's newly, no longer or still
    failing): one range of the index `comparison_change_list`, then those traces' ids."""
    figures = figures_of(comparison, guardrail, revision)
    if figures is None:
        return ChangePage([], None)
    rows = ComparisonChange.objects.filter(comparison=comparison, revision_id=figures["revisionKey"], kind=kind)
    if after:
        rows = rows.filter(pk__gt=decode_cursor(after))
    # No join here: the planner's estimate of a freshly filled list may be far off, and
    # a join could then read the whole list to sort it; the index gives its order.
    found = list(
        rows.order_by("pk").values_list("pk", "trace_id", "reason", "earlier_run", "earlier_revision")[: size + 1]
    )
    more = len(found) > size
    found = found[:size]
    names = dict(RunTrace.objects.filter(pk__in=[row[1] for row in found]).values_list("pk", "trace_id"))
    return ChangePage(
        [
            {
                "trace": names.get(trace, ""),
                "traceUrl": f"/traces/{trace}/",
                "reason": reason,
                "earlierRun": earlier_run,
                "earlierRevision": earlier_revision,
            }
            for _, trace, reason, earlier_run, earlier_revision in found
        ],
        encode_cursor(found[-1][0]) if more else None,
    )


def public(figures: dict[str, Any]) -> dict[str, Any]:
    """A revision's figures as answered (without the rows' keys)."""
    return {name: value for name, value in figures.items() if name not in ("key", "revisionKey")}


def figures_with_traces(comparison: RunComparison, listed: int = LISTED) -> list[dict[str, Any]]:
    """The comparison's figures per revision, each with the first page of its three lists and
    the cursor of the next (two queries per list that has traces, whatever the runs' size)."""
    answer = []
    for figures in comparison.guardrails:
        item = public(figures)
        for kind, key in LISTS:
            page = ChangePage([], None)
            if figures.get(key):
                page = changes_page(comparison, figures["guardrail"], kind, revision=figures["revision"], size=listed)
            item[f"{key}Traces"], item[f"{key}Cursor"] = page.rows, page.next_cursor
        answer.append(item)
    return answer


def progress(comparison: RunComparison) -> dict[str, Any]:
    return {"done": comparison.done, "total": comparison.total, "percent": comparison.percent}
