"""Writing result rows on SQLite: multi-row INSERTs that return the new results (skipping
any stored before), then the violations of the new fails (skipping the findings, trace and
revision, that have one), then the daily roll-up of those inserted: a few
statements per batch of thousands of rows, as on PostgreSQL.

Table and column names in the SQL here are the models' own, and the columns each statement
writes and their defaults are `traces.store.columns`'; no input reaches them.
"""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Sequence
from typing import Any

from django.db import connection
from django.utils import timezone

from traces.store import violation_days
from traces.store.columns import RESULT, VIOLATION, ResultRow, names, violation_row

CREATED_AT = ResultRow._fields.index("created_at")
#: At most this many rows per statement on SQLite: within its statement length (1 MB by default).
MANY_ROWS = 4000


def write_with_inserts(rows: list[ResultRow]) -> None:
    """SQLite: multi-row INSERTs of the results that return the new ones (skipping any stored
    before), then of the violations of the new fails, then the daily roll-up: a few
    statements per batch of thousands of rows, as on PostgreSQL."""
    new = insert_rows(INSERT_RESULTS_SQLITE, [_sqlite_result(row) for row in rows], len(RESULT.columns))
    by_pair = {(row.trace_id, row.revision_id): row for row in rows if row.status == "fail" and not row.shadow}
    violations = [
        _sqlite_violation(by_pair[(trace, revision)], pk) for pk, trace, revision in new if (trace, revision) in by_pair
    ]
    counted = Counter(insert_rows(INSERT_VIOLATIONS_SQLITE, violations, len(VIOLATION.columns)))
    day = timezone.localdate(rows[0].created_at)
    violation_days.add_counts(
        [
            (tenant, guardrail, revision, severity, day, n)
            for (tenant, guardrail, revision, severity), n in counted.items()
        ]
    )


INSERT_RESULTS_SQLITE = (
    f"INSERT INTO {RESULT.table} ({names(RESULT.columns)}) VALUES {{values}}"  # noqa: S608
    " ON CONFLICT DO NOTHING RETURNING id, trace_id, revision_id"
)
INSERT_VIOLATIONS_SQLITE = (
    f"INSERT INTO {VIOLATION.table} ({names(VIOLATION.columns)}) VALUES {{values}}"  # noqa: S608
    " ON CONFLICT DO NOTHING RETURNING tenant_id, guardrail_id, revision_id, severity"
)


def insert_rows(statement: str, rows: Sequence[tuple[Any, ...]], width: int) -> list[tuple[Any, ...]]:
    """SQLite: insert `rows` of `width` values with as few statements as its limits allow
    (`statement` has `{values}` where the rows go); the rows the statements return."""
    limit = min(MANY_ROWS, sqlite_variable_limit() // width)
    returned: list[tuple[Any, ...]] = []
    with connection.cursor() as cursor:
        for start in range(0, len(rows), limit):
            batch = rows[start : start + limit]
            cursor.execute(
                statement.format(values=_value_lists(len(batch), width)), [value for row in batch for value in row]
            )
            returned.extend(tuple(row) for row in cursor.fetchall())
    return returned


def sqlite_variable_limit() -> int:
    """How many parameters one SQLite statement takes (250,000 in builds since 3.32; 999 before)."""
    import sqlite3

    connection.ensure_connection()
    return int(connection.connection.getlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER))


@functools.cache
def _value_lists(count: int, width: int) -> str:
    row = "(" + ", ".join(["%s"] * width) + ")"
    return ", ".join([row] * count)


def _sqlite_result(row: ResultRow) -> tuple[Any, ...]:
    created = connection.ops.adapt_datetimefield_value(row.created_at)
    return (*row[:CREATED_AT], created, *row[CREATED_AT + 1 : RESULT.width])


def _sqlite_violation(row: ResultRow, result_id: int) -> tuple[Any, ...]:
    return violation_row(row, result_id, connection.ops.adapt_datetimefield_value(row.created_at))
