"""The violations' daily roll-up (`ViolationDay`): kept where violations are written and reviewed,
read by the chart and by a guardrail's quality.

Every write of violations that changes what the roll-up counts (their creation, the demo's
re-dating, their deletion, a review that moves them in or out of `reviewed` or `false
positive`) goes through this module in the same transaction: an aggregate of the changed
violations, then one upsert per (tenant, guardrail, revision, severity, day) that adds to
its counts, on PostgreSQL and SQLite alike. The chart (`chart_rows`) reads it when its
filter names no more than guardrail, severity and dates, and the violations otherwise;
both give the same rows. `traces.review.quality.rolled_up_quality` reads its review counts.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from datetime import UTC, date, datetime
from typing import Any

from django.db import connection, transaction
from django.db.models import Count, F, Q, QuerySet, Sum
from django.db.models.functions import TruncDate
from django.utils import timezone

from traces.models import Violation, ViolationDay

_TABLE = ViolationDay._meta.db_table
# Built from the model's own table and column names only; values go as parameters.
_UPSERT = (
    f"INSERT INTO {_TABLE} (tenant_id, guardrail_id, revision_id, severity, day, count, reviewed, "  # noqa: S608
    "false_positives) VALUES (%s, %s, %s, %s, %s, %s, %s, %s) "
    "ON CONFLICT (tenant_id, guardrail_id, revision_id, severity, day) DO UPDATE SET "
    f"count = {_TABLE}.count + excluded.count, reviewed = {_TABLE}.reviewed + excluded.reviewed, "
    f"false_positives = {_TABLE}.false_positives + excluded.false_positives"
)

#: The chart filters the roll-up can answer: the others (state, action, mode, agent, flow) need the violations.
ROLLED_UP_FILTERS = frozenset({"guardrail", "severity", "since", "until"})

#: The review states counted as reviewed (out of `open`), and the one counted as a false positive.
REVIEWED_STATES = frozenset({Violation.State.ACKNOWLEDGED, Violation.State.RESOLVED, Violation.State.FALSE_POSITIVE})
REVIEWED = Q(state__in=sorted(REVIEWED_STATES))
FALSE_POSITIVE = Q(state=Violation.State.FALSE_POSITIVE)

#: A roll-up key: (tenant, guardrail, revision, severity, day).
Key = tuple[int, int, int, str, date]
#: A key's counts: (violations, reviewed, false positives).
Figures = tuple[int, int, int]


def _counts(violations: QuerySet[Violation]) -> list[tuple[Any, ...]]:
    rows = (
        violations.order_by()
        .annotate(g_day=TruncDate("created_at"))
        .values_list("tenant_id", "guardrail_id", "revision_id", "severity", "g_day")
        .annotate(n=Count("pk"), reviewed=Count("pk", filter=REVIEWED), wrong=Count("pk", filter=FALSE_POSITIVE))
    )
    return sorted(rows)


def _upsert(rows: Iterable[tuple[Any, ...]], sign: int) -> None:
    # In key order, so that two writers never wait on each other crosswise.
    values = [(*key, sign * n, sign * reviewed, sign * wrong) for *key, n, reviewed, wrong in sorted(rows)]
    if values:
        with connection.cursor() as cursor:
            cursor.executemany(_UPSERT, values)


def add(violations: QuerySet[Violation]) -> None:
    """Count `violations` (just written, in this transaction) in their days."""
    _upsert(_counts(violations), +1)


def add_counts(rows: list[tuple[Any, ...]]) -> None:
    """Count new (open) violations already counted by the writer: (tenant, guardrail,
    revision, severity, day, n) rows."""
    _upsert([(*key, n, 0, 0) for *key, n in rows], +1)


def subtract(violations: QuerySet[Violation]) -> None:
    """Uncount `violations` (about to be deleted or change their day, in this transaction)."""
    _upsert(_counts(violations), -1)


def delete_of_traces(trace_ids: list[int]) -> int:
    """Delete the violations of these traces and take exactly those out of their days, in
    the caller's transaction; returns how many were deleted.

    Counted from what the DELETE returns (one statement): a violation another transaction
    deleted first is not taken out twice, and one a run committed after an earlier read is
    not deleted uncounted. Their reviews must be gone already (nothing else refers to them).
    """
    if not trace_ids:
        return 0
    returning = "RETURNING tenant_id, guardrail_id, revision_id, severity, created_at, state"
    table = Violation._meta.db_table
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(f"DELETE FROM {table} WHERE trace_id = ANY(%s) {returning}", [trace_ids])  # noqa: S608
            deleted = cursor.fetchall()
        else:
            deleted = []
            for start in range(0, len(trace_ids), 500):
                keys = trace_ids[start : start + 500]
                marks = ", ".join(["%s"] * len(keys))
                cursor.execute(f"DELETE FROM {table} WHERE trace_id IN ({marks}) {returning}", keys)  # noqa: S608
                deleted += cursor.fetchall()
    counts: Counter[Key] = Counter()
    reviewed: Counter[Key] = Counter()
    wrong: Counter[Key] = Counter()
    for tenant, guardrail, revision, severity, created_at, state in deleted:
        moment = datetime.fromisoformat(created_at) if isinstance(created_at, str) else created_at  # SQLite: text
        key = key_of(
            tenant, guardrail, revision, severity, moment if timezone.is_aware(moment) else moment.replace(tzinfo=UTC)
        )
        one = figures_of(state)
        counts[key] += one[0]
        reviewed[key] += one[1]
        wrong[key] += one[2]
    _upsert([(*key, counts[key], reviewed[key], wrong[key]) for key in counts], -1)
    return len(deleted)


def figures_of(state: str) -> Figures:
    """What one violation in `state` adds to its key's counts."""
    return 1, int(state in REVIEWED_STATES), int(state == Violation.State.FALSE_POSITIVE)


def key_of(tenant: int, guardrail: int, revision: int, severity: str, created_at: datetime) -> Key:
    return tenant, guardrail, revision, severity, timezone.localdate(created_at)


def uncount(violation: Violation) -> None:
    """Take a deleted violation out of its day (a trace or a run deleted with its violations)."""
    key = key_of(
        violation.tenant_id, violation.guardrail_id, violation.revision_id, violation.severity, violation.created_at
    )
    _upsert([(*key, *figures_of(violation.state))], -1)


def count_reviews(moves: Iterable[tuple[Key, str, str]]) -> None:
    """Count review changes, (key, old state, new state) of each violation reviewed in this
    transaction: out of `reviewed` or `false positive` and into them, back and forth."""
    deltas: Counter[tuple[Key, int]] = Counter()
    for key, old, new in moves:
        before, after = figures_of(old), figures_of(new)
        deltas[(key, 1)] += after[1] - before[1]
        deltas[(key, 2)] += after[2] - before[2]
    keys = sorted({key for key, _ in deltas})
    _upsert([(*key, 0, deltas[(key, 1)], deltas[(key, 2)]) for key in keys if deltas[(key, 1)] or deltas[(key, 2)]], +1)


def redate(violations: QuerySet[Violation], created_at: Any) -> None:
    """Give `violations` another creation time (a value or an expression), counting them
    on their new day: the one way a violation's time changes."""
    with transaction.atomic():
        subtract(violations)
        violations.update(created_at=created_at)
        add(violations)


def rebuild() -> int:
    """Count every violation again (after violations were written around `add`, as a bulk
    load does); returns the number of roll-up rows."""
    with transaction.atomic():
        ViolationDay.objects.all().delete()
        created = ViolationDay.objects.bulk_create(
            [
                ViolationDay(
                    tenant_id=tenant,
                    guardrail_id=guardrail,
                    revision_id=revision,
                    severity=severity,
                    day=day,
                    count=n,
                    reviewed=reviewed,
                    false_positives=wrong,
                )
                for tenant, guardrail, revision, severity, day, n, reviewed, wrong in _counts(Violation.objects.all())
            ],
            batch_size=1000,
        )
    return len(created)


def chart_rows(
    violations: QuerySet[Violation], days: QuerySet[ViolationDay] | None, by: str, first: date, last: date
) -> list[tuple[date, str, int]]:
    """(day, series, count) of the violations from `first` to `last`, by guardrail or severity.

    `days`: the roll-up under the same scope and filters, when the filters allow it; else
    the violations (already scoped and filtered to those days) are counted.
    """
    series = F("guardrail__guardrail_id") if by == "guardrail" else F("severity")
    rows: Iterable[tuple[Any, ...]]
    if days is not None:
        rows = (
            days.filter(day__gte=first, day__lte=last)
            .order_by()
            .annotate(series=series)
            .values("day", "series")
            .annotate(n=Sum("count"))
            .filter(n__gt=0)
            .values_list("day", "series", "n")
        )
    else:
        rows = (
            violations.order_by()
            .annotate(day=TruncDate("created_at"), series=series)
            .values("day", "series")
            .annotate(n=Count("pk"))
            .values_list("day", "series", "n")
        )
    return [(day, name, int(n)) for day, name, n in rows]
