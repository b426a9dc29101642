"""The violations' daily roll-up (`ViolationDay`): kept where violations are written, read by the chart.

Every write of violations that changes what the chart counts (their creation, the demo's
re-dating) goes through `add` (and `subtract`) in the same transaction: an aggregate of the
changed violations, then one upsert per (tenant, guardrail, severity, day) that increments,
on PostgreSQL and SQLite alike. The chart (`chart_rows`) reads it when its filter names no
more than guardrail, severity and dates, and the violations otherwise; both give the same rows.
"""

from __future__ import annotations

from datetime import date
from typing import Any

from django.db import connection, transaction
from django.db.models import Count, F, QuerySet, Sum
from django.db.models.functions import TruncDate
from django.utils import timezone

from traces.models import Violation, ViolationDay

_TABLE = ViolationDay._meta.db_table
# Built from the model's own table and column names only; values go as parameters.
_UPSERT = (
    f"INSERT INTO {_TABLE} (tenant_id, guardrail_id, severity, day, count) "  # noqa: S608
    "VALUES (%s, %s, %s, %s, %s) "
    "ON CONFLICT (tenant_id, guardrail_id, severity, day) DO UPDATE SET "
    f"count = {_TABLE}.count + excluded.count"
)

#: The chart filters the roll-up can answer: the others (state, action, mode, agent, flow) need the violations.
ROLLED_UP_FILTERS = frozenset({"guardrail", "severity", "since", "until"})


def _counts(violations: QuerySet[Violation]) -> list[tuple[Any, ...]]:
    rows = (
        violations.order_by()
        .annotate(g_day=TruncDate("created_at"))
        .values_list("tenant_id", "guardrail_id", "severity", "g_day")
        .annotate(n=Count("pk"))
    )
    return sorted(rows)


def _upsert(rows: list[tuple[Any, ...]], sign: int) -> None:
    if rows:
        with connection.cursor() as cursor:
            # In key order, so that two writers never wait on each other crosswise.
            cursor.executemany(_UPSERT, [(*key, sign * n) for *key, n in rows])


def add(violations: QuerySet[Violation]) -> None:
    """Count `violations` (just written, in this transaction) in their days."""
    _upsert(_counts(violations), +1)


def add_counts(rows: list[tuple[Any, ...]]) -> None:
    """Count violations already counted by the writer: (tenant, guardrail, severity, day, n) rows."""
    _upsert(sorted(rows), +1)


def subtract(violations: QuerySet[Violation]) -> None:
    """Uncount `violations` (about to change their day, in this transaction)."""
    _upsert(_counts(violations), -1)


def uncount(violation: Violation) -> None:
    """Take a deleted violation out of its day (a trace or a run deleted with its violations)."""
    key = (violation.tenant_id, violation.guardrail_id, violation.severity,
           timezone.localdate(violation.created_at))
    _upsert([(*key, 1)], -1)


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
            [ViolationDay(tenant_id=tenant, guardrail_id=guardrail, severity=severity, day=day, count=n)
             for tenant, guardrail, severity, day, n in _counts(Violation.objects.all())],
            batch_size=1000,
        )
    return len(created)


def chart_rows(violations: QuerySet[Violation], days: QuerySet[ViolationDay] | None, by: str,
               first: date, last: date) -> list[tuple[date, str, int]]:
    """(day, series, count) of the violations from `first` to `last`, by guardrail or severity.

    `days`: the roll-up under the same scope and filters, when the filters allow it; else
    the violations (already scoped and filtered to those days) are counted.
    """
    series = F("guardrail__guardrail_id") if by == "guardrail" else F("severity")
    if days is not None:
        rows = (days.filter(day__gte=first, day__lte=last).order_by().annotate(series=series)
                .values("day", "series").annotate(n=Sum("count")).filter(n__gt=0)
                .values_list("day", "series", "n"))
    else:
        rows = (violations
                .order_by().annotate(day=TruncDate("created_at"), series=series)
                .values("day", "series").annotate(n=Count("pk")).values_list("day", "series", "n"))
    return [(day, name, int(n)) for day, name, n in rows]
