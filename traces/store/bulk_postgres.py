"""Writing result rows on PostgreSQL: `COPY` (binary) into the results table, or into a
temporary table that one statement then inserts from, skipping results stored before, with
a violation for each new `fail` and the daily roll-up counted from what it returns.

Table and column names in the SQL here are the models' own, and the columns each statement
writes and their defaults are `traces.store.columns`'; no input reaches them.
"""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any, NamedTuple

from django.db import IntegrityError, connection, transaction
from django.utils import timezone
from psycopg.types.json import set_json_dumps

from traces.store import violation_days
from traces.store.columns import RESULT, VIOLATION, ResultRow, names, violation_row

LOAD_TABLE = "kindgi_result_load"
#: The new fails' violations of a batch copied fresh, inserted from here skipping the findings stored.
VIOLATION_LOAD_TABLE = "kindgi_violation_load"
#: The loaded rows' columns: a ResultRow's, the results' columns and then what violations copy.
LOADED = ResultRow._fields
#: Up to this many results are written with one statement and no temporary table.
FEW_ROWS = 64
# The results not stored before, a violation for each new fail whose finding (trace,
# revision) has none yet (in key order: two writers of the same findings never wait on each
# other crosswise; a finding stored before keeps its violation), and the violations counted
# per (tenant, guardrail, severity) for the daily roll-up: one statement, reading the rows
# from the loaded table (a large batch) or from a VALUES list (a few rows: POST evaluate).
INSERT_RESULTS = """
WITH {values}new AS (
  INSERT INTO {results} ({result_columns})
  SELECT {result_columns} FROM {load}
  ON CONFLICT DO NOTHING
  RETURNING id, trace_id, revision_id, status, shadow
), violations AS (
  INSERT INTO {violations} ({violation_columns})
  SELECT {violation_values}
  FROM new n JOIN {load} l ON l.trace_id = n.trace_id AND l.revision_id = n.revision_id
  WHERE n.status = 'fail' AND NOT n.shadow
  ORDER BY n.trace_id, n.revision_id
  ON CONFLICT DO NOTHING
  RETURNING tenant_id, guardrail_id, revision_id, severity
)
SELECT tenant_id, guardrail_id, revision_id, severity, count(*) FROM violations
GROUP BY tenant_id, guardrail_id, revision_id, severity ORDER BY tenant_id, guardrail_id, revision_id, severity
"""


def new_violation_values(result_id: str, prefix: str) -> str:
    """The SELECT list of a new fail's violation, in `VIOLATION.columns` order: its result's
    key (`result_id`), the loaded row's columns (`prefix`: `l.`) and the defaults."""
    return VIOLATION.values([result_id if column == "result_id" else prefix + column for column in VIOLATION.written])


def loaded_type(column: str) -> str:
    """A loaded column's type on PostgreSQL: the result's column's, or the violation's it is copied to."""
    table = RESULT if column in RESULT.written else VIOLATION
    return table.db_type(column, connection)


class Statements(NamedTuple):
    """The statements of this module, made on first use: their types are the connection's."""

    create_load: str
    copy_load: str
    insert_loaded: str
    value_row: str
    copy_results: str
    result_types: tuple[str, ...]
    create_violation_load: str
    copy_violations: str
    violation_types: tuple[str, ...]
    insert_violations: str


@functools.cache
def statements() -> Statements:
    definitions = ", ".join(f"{column} {loaded_type(column)}" for column in LOADED)
    violations = ", ".join(f"{column} {VIOLATION.db_type(column, connection)}" for column in VIOLATION.columns)
    return Statements(
        create_load=f"CREATE TEMPORARY TABLE IF NOT EXISTS {LOAD_TABLE} ({definitions}) ON COMMIT DELETE ROWS",
        copy_load=f"COPY {LOAD_TABLE} ({names(LOADED)}) FROM STDIN",
        insert_loaded=_insert_results(LOAD_TABLE),
        value_row="(" + ", ".join(f"%s::{loaded_type(column)}" for column in LOADED) + ")",
        # Fresh rows are copied in binary: nothing to format as text here, nothing to parse there.
        copy_results=f"COPY {RESULT.table} (id, {names(RESULT.columns)}) FROM STDIN (FORMAT BINARY)",
        result_types=("int8", *RESULT.copy_types(connection)),
        create_violation_load=f"CREATE TEMPORARY TABLE IF NOT EXISTS {VIOLATION_LOAD_TABLE} ({violations}) "
        "ON COMMIT DELETE ROWS",
        copy_violations=f"COPY {VIOLATION_LOAD_TABLE} ({names(VIOLATION.columns)}) FROM STDIN (FORMAT BINARY)",
        violation_types=VIOLATION.copy_types(connection),
        # In key order, so that two writers of the same findings never wait on each other crosswise.
        insert_violations=f"INSERT INTO {VIOLATION.table} ({names(VIOLATION.columns)}) "  # noqa: S608
        f"SELECT {names(VIOLATION.columns)} FROM {VIOLATION_LOAD_TABLE} ORDER BY trace_id, revision_id "
        "ON CONFLICT DO NOTHING RETURNING tenant_id, guardrail_id, revision_id, severity",
    )


def _insert_results(load: str, values: str = "") -> str:
    return INSERT_RESULTS.format(
        results=RESULT.table,
        result_columns=names(RESULT.columns),
        violations=VIOLATION.table,
        violation_columns=names(VIOLATION.columns),
        violation_values=new_violation_values("n.id", "l."),
        load=load,
        values=values,
    )


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


@functools.cache
def new_keys(table: str) -> str:
    """The statement that takes `%s` new keys from `table`'s id sequence, for rows copied
    with their keys. The sequence is looked up once per statement: per key, the look-up
    cost ten times the key."""
    return (
        "WITH seq AS MATERIALIZED (SELECT pg_get_serial_sequence("  # noqa: S608
        f"'{table}', 'id')::regclass AS s) "
        "SELECT nextval(s) FROM seq, generate_series(1, %s)"
    )


def _as_is(text: Any) -> Any:
    """JSON columns are given as JSON text already (a result's details, a trace's canonical
    document): copied as they are."""
    return text


def copy_with_new_keys(
    table: str, copy: str, types: Sequence[str], count: int, rows: Iterable[tuple[Any, ...]]
) -> list[int] | None:
    """COPY (`copy`, binary, `id` its first column) `count` rows into `table`, each after a
    key taken from the table's sequence, in a savepoint: no temporary table and no second
    insert, for rows most likely not stored yet. The keys, in the rows' order; None, with
    nothing written, when a unique key refuses one of them (the caller then inserts skipping
    what is stored). COPY's psycopg errors are told as Django's, so that a deadline's cancel
    is one."""
    try:
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(new_keys(table), [count])
            keys = [key for (key,) in cursor.fetchall()]
            set_json_dumps(_as_is, context=cursor.cursor)
            with connection.wrap_database_errors, cursor.cursor.copy(copy) as copying:
                copying.set_types(types)
                write = copying.write_row
                for key, row in zip(keys, rows, strict=True):
                    write((key, *row))
    except IntegrityError:
        return None
    return keys


def _copy_fresh(rows: list[ResultRow]) -> list[tuple[Any, ...]] | None:
    """Results most likely not stored yet (a chunk's first attempt, an ingested batch): COPY
    them straight into their table (`copy_with_new_keys`), and the violations of the fails
    through a temporary table, inserted skipping the findings stored before (another run,
    the runtime found them: they keep their violation). None when some results were stored
    first (a worker that took the chunk over, a redelivered task): the caller then inserts
    skipping what is stored."""
    sql = statements()
    width = RESULT.width
    keys = copy_with_new_keys(
        RESULT.table, sql.copy_results, sql.result_types, len(rows), (row[:width] for row in rows)
    )
    if keys is None:
        return None
    failed = [(key, row) for key, row in zip(keys, rows, strict=True) if row.status == "fail" and not row.shadow]
    return _insert_new_violations(failed) if failed else []


def _insert_new_violations(failed: list[tuple[int, ResultRow]]) -> list[tuple[Any, ...]]:
    """Insert the violations of these (result key, row) fails unless their finding has one;
    the inserted ones counted per (tenant, guardrail, revision, severity)."""
    sql = statements()
    with connection.cursor() as cursor:
        cursor.execute(sql.create_violation_load)
        with connection.wrap_database_errors, cursor.cursor.copy(sql.copy_violations) as copy:
            copy.set_types(sql.violation_types)
            for key, row in failed:
                copy.write_row(violation_row(row, key, row.created_at))
        cursor.execute(sql.insert_violations)
        counts = Counter(tuple(found) for found in cursor.fetchall())
        cursor.execute(f"TRUNCATE {VIOLATION_LOAD_TABLE}")
    return [(*key, n) for key, n in sorted(counts.items())]


def _insert_with_copy(rows: list[ResultRow]) -> list[tuple[Any, ...]]:
    with connection.cursor() as cursor:
        if len(rows) <= FEW_ROWS:
            cursor.execute(_insert_values(len(rows)), [value for row in rows for value in row])
            counted: list[tuple[Any, ...]] = cursor.fetchall()
        else:
            sql = statements()
            cursor.execute(sql.create_load)
            with connection.wrap_database_errors, cursor.cursor.copy(sql.copy_load) as copy:
                for row in rows:
                    copy.write_row(row)
            cursor.execute(sql.insert_loaded)
            counted = cursor.fetchall()
            cursor.execute(f"TRUNCATE {LOAD_TABLE}")
    return counted


@functools.cache
def _insert_values(count: int) -> str:
    """The one statement that writes `count` rows given as parameters."""
    row = statements().value_row
    return _insert_results("load_rows", f"load_rows ({names(LOADED)}) AS (VALUES {', '.join([row] * count)}),\n")
