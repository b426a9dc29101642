"""Writing result rows on PostgreSQL: `COPY` (binary) into the results table, or into a
temporary table that one statement then inserts from, skipping results stored before, with
a violation for each new `fail` and the daily roll-up counted from what it returns.

Table and column names in the SQL here are the models' own; no input reaches them.
"""

from __future__ import annotations

import functools
from collections import Counter
from typing import TYPE_CHECKING, Any

import psycopg
from django.db import IntegrityError, connection, transaction
from django.utils import timezone
from psycopg.types.json import set_json_dumps

from traces.models import EvaluationResult, Violation
from traces.store import violation_days

if TYPE_CHECKING:
    from traces.store.bulk import ResultRow

LOAD_TABLE = "kindgi_result_load"
# The first 13 are a ResultRow's first fields; `stage` and `step` are its last two.
STORED_COLUMNS = (
    "tenant_id, trace_id, guardrail_id, revision_id, evaluation_id, mode, status, reason,"
    " duration_ms, details, created_at, skip_reason, shadow"
)
RESULT_COLUMNS = f"{STORED_COLUMNS}, stage, step"
LOAD_COLUMNS = f"{STORED_COLUMNS}, action, severity, agent, flow, stage, step"
CREATE_LOAD = (
    f"CREATE TEMPORARY TABLE IF NOT EXISTS {LOAD_TABLE} (tenant_id bigint, trace_id bigint,"
    " guardrail_id bigint, revision_id bigint, evaluation_id bigint, mode text, status text,"
    " reason text, duration_ms double precision, details jsonb, created_at timestamptz,"
    " skip_reason text, shadow boolean,"
    " action text, severity text, agent text, flow text, stage text, step integer) ON COMMIT DELETE ROWS"
)
# The results not stored before, a violation for each new fail, and the violations counted
# per (tenant, guardrail, severity) for the daily roll-up: one statement, reading the rows
# from the loaded table (a large batch) or from a VALUES list (a few rows: POST evaluate).
INSERT_RESULTS = """
WITH {values}new AS (
  INSERT INTO {results} ({columns})
  SELECT {columns} FROM {load}
  ON CONFLICT DO NOTHING
  RETURNING id, trace_id, revision_id, status, shadow
), violations AS (
  INSERT INTO {violations} (tenant_id, trace_id, result_id, guardrail_id, revision_id,
      evaluation_id, action, severity, mode, reason, agent, flow, created_at, state,
      reviewed_by_label, review_note)
  SELECT l.tenant_id, l.trace_id, n.id, l.guardrail_id, l.revision_id, l.evaluation_id, l.action,
         l.severity, l.mode, l.reason, l.agent, l.flow, l.created_at, 'open', '', ''
  FROM new n JOIN {load} l ON l.trace_id = n.trace_id AND l.revision_id = n.revision_id
  WHERE n.status = 'fail' AND NOT n.shadow
  ON CONFLICT DO NOTHING
  RETURNING tenant_id, guardrail_id, revision_id, severity
)
SELECT tenant_id, guardrail_id, revision_id, severity, count(*) FROM violations
GROUP BY tenant_id, guardrail_id, revision_id, severity ORDER BY tenant_id, guardrail_id, revision_id, severity
"""
VALUE_TYPES = (
    "bigint",
    "bigint",
    "bigint",
    "bigint",
    "bigint",
    "text",
    "text",
    "text",
    "double precision",
    "jsonb",
    "timestamptz",
    "text",
    "boolean",
    "text",
    "text",
    "text",
    "text",
    "text",
    "integer",
)
#: Up to this many results are written with one statement and no temporary table.
FEW_ROWS = 64


def _insert_results(load: str, values: str = "") -> str:
    return INSERT_RESULTS.format(
        results=EvaluationResult._meta.db_table,
        violations=Violation._meta.db_table,
        columns=RESULT_COLUMNS,
        load=load,
        values=values,
    )


INSERT_LOADED = _insert_results(LOAD_TABLE)


def write_with_copy(rows: list[ResultRow], fresh: bool = False) -> None:
    """PostgreSQL: COPY into a temporary table, then one INSERT of results and violations;
    a few rows go in one statement, as a VALUES list; a `fresh` batch straight in."""
    counted = _copy_fresh(rows) if fresh and len(rows) > FEW_ROWS else None
    if counted is None:
        counted = _insert_with_copy(rows)
    day = timezone.localdate(rows[0].created_at)
    violation_days.add_counts(
        [(tenant, guardrail, revision, severity, day, n) for tenant, guardrail, revision, severity, n in counted]
    )


# The sequence is looked up once per statement: per key, the look-up cost ten times the key.
NEW_RESULT_KEYS = (
    "WITH seq AS MATERIALIZED (SELECT pg_get_serial_sequence("  # noqa: S608
    f"'{EvaluationResult._meta.db_table}', 'id')::regclass AS s) "
    "SELECT nextval(s) FROM seq, generate_series(1, %s)"
)
# Fresh rows are copied in binary: nothing to format as text here, nothing to parse there.
COPY_RESULTS = f"COPY {EvaluationResult._meta.db_table} (id, {RESULT_COLUMNS}) FROM STDIN (FORMAT BINARY)"
RESULT_TYPES = (
    "int8",
    "int8",
    "int8",
    "int8",
    "int8",
    "int8",
    "text",
    "text",
    "text",
    "float8",
    "jsonb",
    "timestamptz",
    "text",
    "bool",
    "text",
    "int4",
)
VIOLATION_COLUMNS = (
    "tenant_id, trace_id, result_id, guardrail_id, revision_id, evaluation_id, action, severity,"
    " mode, reason, agent, flow, created_at, state, reviewed_by_label, review_note"
)


def violation_row(row: ResultRow, result_id: int, created_at: Any) -> tuple[Any, ...]:
    """The values of a new fail's violation, in `VIOLATION_COLUMNS` order (`created_at` as
    the backend takes it): one definition for both backends."""
    return (
        row.tenant_id,
        row.trace_id,
        result_id,
        row.guardrail_id,
        row.revision_id,
        row.evaluation_id,
        row.action,
        row.severity,
        row.mode,
        row.reason,
        row.agent,
        row.flow,
        created_at,
        "open",
        "",
        "",
    )


COPY_VIOLATIONS = f"COPY {Violation._meta.db_table} ({VIOLATION_COLUMNS}) FROM STDIN (FORMAT BINARY)"
VIOLATION_TYPES = (
    "int8",
    "int8",
    "int8",
    "int8",
    "int8",
    "int8",
    "text",
    "text",
    "text",
    "text",
    "text",
    "text",
    "timestamptz",
    "text",
    "text",
    "text",
)


def _as_is(text: Any) -> Any:
    """The details of a row are JSON text already (`_stored_details`): copied as they are."""
    return text


def _copy_fresh(rows: list[ResultRow]) -> list[tuple[Any, ...]] | None:
    """Results most likely not stored yet (a chunk's first attempt, an ingested batch): COPY
    them, with keys taken from their sequence, and the violations of the fails straight
    into their tables (no temporary table, no conflict checks). None when some were stored
    first (a worker that took the chunk over, a redelivered task): the caller then inserts
    skipping what is stored."""
    try:
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(NEW_RESULT_KEYS, [len(rows)])
            keys = [key for (key,) in cursor.fetchall()]
            set_json_dumps(_as_is, context=cursor.cursor)
            with cursor.cursor.copy(COPY_RESULTS) as copy:
                copy.set_types(RESULT_TYPES)
                write = copy.write_row
                for key, row in zip(keys, rows, strict=True):
                    write((key, *row[:13], row.stage, row.step))
            failed = [
                (key, row) for key, row in zip(keys, rows, strict=True) if row.status == "fail" and not row.shadow
            ]
            if failed:
                with cursor.cursor.copy(COPY_VIOLATIONS) as copy:
                    copy.set_types(VIOLATION_TYPES)
                    for key, row in failed:
                        copy.write_row(violation_row(row, key, row.created_at))
    except (IntegrityError, psycopg.IntegrityError):  # COPY speaks psycopg's errors, not Django's
        return None
    counts = Counter((row.tenant_id, row.guardrail_id, row.revision_id, row.severity) for _, row in failed)
    return [(*key, n) for key, n in sorted(counts.items())]


def _insert_with_copy(rows: list[ResultRow]) -> list[tuple[Any, ...]]:
    with connection.cursor() as cursor:
        if len(rows) <= FEW_ROWS:
            cursor.execute(_insert_values(len(rows)), [value for row in rows for value in row])
            counted: list[tuple[Any, ...]] = cursor.fetchall()
        else:
            cursor.execute(CREATE_LOAD)
            with cursor.cursor.copy(f"COPY {LOAD_TABLE} ({LOAD_COLUMNS}) FROM STDIN") as copy:
                for row in rows:
                    copy.write_row(row)
            cursor.execute(INSERT_LOADED)
            counted = cursor.fetchall()
            cursor.execute(f"TRUNCATE {LOAD_TABLE}")
    return counted


@functools.cache
def _insert_values(count: int) -> str:
    """The one statement that writes `count` rows given as parameters."""
    row = "(" + ", ".join(f"%s::{kind}" for kind in VALUE_TYPES) + ")"
    return _insert_results("load_rows", f"load_rows ({LOAD_COLUMNS}) AS (VALUES {', '.join([row] * count)}),\n")
