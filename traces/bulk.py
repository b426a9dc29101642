"""Reading stored traces and writing results and violations in bulk, in a few queries per batch.

Every server path that stores results (evaluation runs, the runtime evaluation of ingested
batches, `POST evaluate`) writes them here, so the number of queries per batch does not
grow with its size:

- traces are read by keyset (primary key order), only the columns evaluation needs, the
  document as JSON text parsed with orjson rather than as model instances;
- on PostgreSQL the results go in with `COPY` into a temporary table, then one statement
  inserts them (skipping any stored before: results are unique per trace, revision and
  run), inserts a violation for each new `fail` and returns the violations to count in
  the chart's daily roll-up; on SQLite, multi-row INSERTs that return the new results do
  the same in a few statements (as many rows in each as SQLite's limits allow).

Table and column names in the SQL here are the models' own; no input reaches them.
"""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import datetime
from time import perf_counter
from typing import Any, NamedTuple, Protocol

import orjson
import psycopg
from django.db import IntegrityError, connection, transaction
from django.db.models import QuerySet, TextField
from django.db.models.functions import Cast
from django.utils import timezone
from psycopg.types.json import set_json_dumps

from guardrails.engine.evaluate import Engine, Plan
from guardrails.engine.types import Context, Mode, Result
from guardrails.services import Enforced
from traces import violation_days
from traces.judge.services import EvaluationServices
from traces.models import Evaluation, EvaluationResult, RunTrace, Violation


class StoredTrace(NamedTuple):
    """What evaluating a stored trace needs of its row: no model instance, no tenant row."""

    pk: int
    tenant_id: int
    trace_id: str
    agent: str
    flow: str
    document: dict[str, Any]


class TraceRow(Protocol):
    """A stored trace as results name it: a RunTrace or a StoredTrace."""

    @property
    def pk(self) -> Any: ...
    @property
    def tenant_id(self) -> Any: ...
    @property
    def agent(self) -> str: ...
    @property
    def flow(self) -> str: ...


Verdicts = Iterable[tuple[TraceRow, Sequence[Result]]]

# ---------------------------------------------------------------------------- reading


def stored_traces(queryset: QuerySet[RunTrace], size: int) -> Iterator[list[StoredTrace]]:
    """The rows of `queryset` in primary-key order, `size` at a time, each batch one query.

    No cursor stays open while a batch is evaluated and written: PostgreSQL keeps no long
    transaction open, and SQLite can turn no stale reader into a writer.
    """
    columns = queryset.annotate(document_text=Cast("document", TextField())).values_list(
        "pk", "tenant_id", "trace_id", "agent", "flow", "document_text"
    )
    after = None
    while True:
        page = columns if after is None else columns.filter(pk__gt=after)
        rows = list(page.order_by("pk")[:size])
        if not rows:
            return
        yield [
            StoredTrace(pk, tenant, trace_id, agent, flow, orjson.loads(text))
            for pk, tenant, trace_id, agent, flow, text in rows
        ]
        if len(rows) < size:
            return
        after = rows[-1][0]


# ---------------------------------------------------------------------------- writing


def run_is_live(evaluation_id: int) -> bool:
    """Whether a run may still write, holding it so until this transaction ends.

    On PostgreSQL the run's row is locked FOR KEY SHARE: writers do not wait on each other
    nor on progress updates, but cancelling (SELECT … FOR UPDATE) waits until every batch
    being written is committed, and every batch after it sees the run cancelled.
    """
    table = Evaluation._meta.db_table
    lock = " FOR KEY SHARE" if connection.vendor == "postgresql" else ""
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT status FROM {table} WHERE id = %s{lock}", [evaluation_id])  # noqa: S608
        row = cursor.fetchone()
    return row is not None and row[0] == Evaluation.Status.RUNNING


def record_results(
    verdicts: Verdicts,
    enforced: Sequence[Enforced],
    *,
    mode: Mode,
    evaluation: Evaluation | None = None,
    while_running: bool = False,
    fresh: bool = False,
) -> bool:
    """Store each result, and a violation for each new `fail` not in shadow; a `skipped`
    one only in a run (with why: `skip_reason`), for the run's results page.

    Repeating this for the same traces, revisions and run stores nothing twice. With
    `while_running` (a run's chunk), the batch is written only while the run is running
    (see `run_is_live`): False when it was cancelled or failed and nothing was written.
    `fresh`: these results are most likely not stored yet (a chunk's first attempt, an
    ingested batch): they are copied straight in, or inserted skipping any stored.
    """
    items = list(verdicts)
    evaluation_id = None if evaluation is None else evaluation.pk
    with transaction.atomic():
        if while_running and evaluation_id is not None and not run_is_live(evaluation_id):
            return False
        store_rows(result_rows(items, enforced, mode, evaluation_id), fresh=fresh)
    return True


def evaluate_rows(
    engine: Engine,
    enforced: Sequence[Enforced],
    traces: Sequence[StoredTrace],
    mode: Mode,
    evaluation_id: int | None,
    services: EvaluationServices,
    *,
    mark_shadow: bool = False,
) -> list[ResultRow]:
    """Evaluate each guardrail over each trace straight into the rows to store: the
    engine's verdict and its duration, as `evaluate_guardrail` gives them, without a Result
    object per evaluation (a run makes millions); `skipped` gives a row in a run only. A
    guardrail in shadow judges the traces it samples, and its fails are no violation.

    As the CI path does, the guardrails are planned once per (tenant, agent, flow) of the
    traces (`Engine.plan`: scope and checks resolved once), not for each trace.
    `mark_shadow`: a shadow guardrail's details say `shadow`, as the runtime verdict's do
    (`traces.services.with_shadow`)."""
    guardrails = [item.guardrail for item in enforced]
    targets = [(index, *_target(item), item.shadow, item) for index, item in enumerate(enforced)]
    keep_skipped = evaluation_id is not None
    now = timezone.now()
    plans: dict[tuple[Any, Any, Any], Plan] = {}
    bound = services.bound()
    rows: list[ResultRow] = []
    append = rows.append
    for trace in traces:
        document = trace.document
        get = document.get
        key = (get("tenant"), get("agent"), get("flow"))
        plan = plans.get(key)
        if plan is None:
            plan = plans[key] = engine.plan(guardrails, Context(mode, *key, services=bound))
        verdict = plan.verdict
        for index, guardrail_pk, revision_pk, action, severity, shadow, item in targets:
            if shadow and not item.sampled(trace.trace_id):
                continue
            started = perf_counter()
            status, reason, details = verdict(index, document)
            if shadow and mark_shadow:
                details = {**details, "shadow": True}
            if status != "skipped" or keep_skipped:
                skip, stored = _stored_details(status, details)
                append(
                    ResultRow(
                        trace.tenant_id,
                        trace.pk,
                        guardrail_pk,
                        revision_pk,
                        evaluation_id,
                        mode,
                        status,
                        reason or "",
                        (perf_counter() - started) * 1000,
                        stored,
                        now,
                        skip,
                        shadow,
                        action,
                        severity,
                        trace.agent or "",
                        trace.flow or "",
                    )
                )
    return rows


def _stored_details(status: str, details: Mapping[str, Any]) -> tuple[str, str]:
    """A result's `skip_reason` and its details as JSON text: a skipped one keeps only why."""
    if status == "skipped":
        return str(details.get("skip", "")), "{}"
    return "", orjson.dumps(dict(details)).decode() if details else "{}"


def store_rows(rows: list[ResultRow], *, while_running: int | None = None, fresh: bool = False) -> bool:
    """Store result rows and a violation for each new `fail` (see `record_results`);
    `while_running`: the run whose batch this is, written only while it is running."""
    with transaction.atomic():
        if while_running is not None and not run_is_live(while_running):
            return False
        write_rows(rows, fresh=fresh)
    return True


def write_rows(rows: list[ResultRow], *, fresh: bool = False) -> None:
    """Store result rows and their violations in the caller's transaction (no savepoint)."""
    if rows and connection.vendor == "postgresql":
        _write_with_copy(rows, fresh)
    elif rows:
        _write_with_inserts(rows)


@contextmanager
def commits_without_waiting_for_disk() -> Iterator[None]:
    """A run's chunk commits without waiting for each WAL flush (PostgreSQL; reset after).

    Safe for a chunk, whose every write is idempotent: a crash of the database can lose
    only its last commits, and WAL is flushed in order, so what survives is a prefix (a
    claim, some batches, maybe the chunk marked done). A chunk not marked done is
    evaluated again when its lease runs out, and its stored results are not stored twice.
    """
    if connection.vendor != "postgresql":
        yield
        return
    with connection.cursor() as cursor:
        cursor.execute("SET synchronous_commit TO OFF")
    try:
        yield
    finally:
        with connection.cursor() as cursor:
            cursor.execute("RESET synchronous_commit")


class ResultRow(NamedTuple):
    """One result to store, with what its violation copies (trace and guardrail columns)."""

    tenant_id: int
    trace_id: int
    guardrail_id: int
    revision_id: int
    evaluation_id: int | None
    mode: str
    status: str
    reason: str
    duration_ms: float
    details: str
    created_at: datetime
    skip_reason: str
    shadow: bool
    action: str
    severity: str
    agent: str
    flow: str


def result_rows(
    items: Sequence[tuple[TraceRow, Sequence[Result]]],
    enforced: Sequence[Enforced],
    mode: Mode,
    evaluation_id: int | None,
) -> list[ResultRow]:
    targets = {item.guardrail.id: _target(item) for item in enforced}
    shadows = {item.guardrail.id for item in enforced if item.shadow}
    now = timezone.now()
    rows = []
    for trace, results in items:
        for result in results:
            if result.guardrail not in targets or (result.status == "skipped" and evaluation_id is None):
                continue
            skip, details = _stored_details(result.status, result.details)
            rows.append(
                ResultRow(
                    trace.tenant_id,
                    trace.pk,
                    *targets[result.guardrail][:2],
                    evaluation_id,
                    mode,
                    result.status,
                    result.reason or "",
                    result.duration_ms,
                    details,
                    now,
                    skip,
                    result.guardrail in shadows,
                    *targets[result.guardrail][2:],
                    trace.agent or "",
                    trace.flow or "",
                )
            )
    return rows


def _target(item: Enforced) -> tuple[int, int, str, str]:
    revision = item.revision
    document = revision.document
    return (
        revision.guardrail_id,
        revision.pk,
        str(document["action"]["on-violation"]),
        str(document.get("severity") or ""),
    )


LOAD_TABLE = "kindgi_result_load"
RESULT_COLUMNS = (
    "tenant_id, trace_id, guardrail_id, revision_id, evaluation_id, mode, status, reason,"
    " duration_ms, details, created_at, skip_reason, shadow"
)
LOAD_COLUMNS = f"{RESULT_COLUMNS}, action, severity, agent, flow"
CREATE_LOAD = (
    f"CREATE TEMPORARY TABLE IF NOT EXISTS {LOAD_TABLE} (tenant_id bigint, trace_id bigint,"
    " guardrail_id bigint, revision_id bigint, evaluation_id bigint, mode text, status text,"
    " reason text, duration_ms double precision, details jsonb, created_at timestamptz,"
    " skip_reason text, shadow boolean,"
    " action text, severity text, agent text, flow text) ON COMMIT DELETE ROWS"
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


def _write_with_copy(rows: list[ResultRow], fresh: bool = False) -> None:
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
)
VIOLATION_COLUMNS = (
    "tenant_id, trace_id, result_id, guardrail_id, revision_id, evaluation_id, action, severity,"
    " mode, reason, agent, flow, created_at, state, reviewed_by_label, review_note"
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
                    write((key, *row[:13]))
            failed = [
                (key, row) for key, row in zip(keys, rows, strict=True) if row.status == "fail" and not row.shadow
            ]
            if failed:
                with cursor.cursor.copy(COPY_VIOLATIONS) as copy:
                    copy.set_types(VIOLATION_TYPES)
                    for key, row in failed:
                        copy.write_row(
                            (
                                row.tenant_id,
                                row.trace_id,
                                key,
                                row.guardrail_id,
                                row.revision_id,
                                row.evaluation_id,
                                row.action,
                                row.severity,
                                row.mode,
                                row.reason,
                                row.agent,
                                row.flow,
                                row.created_at,
                                "open",
                                "",
                                "",
                            )
                        )
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


RESULT_COUNT = len(RESULT_COLUMNS.split(","))
VIOLATION_COUNT = len(VIOLATION_COLUMNS.split(","))
#: At most this many rows per statement on SQLite: within its statement length (1 MB by default).
MANY_ROWS = 4000


def _write_with_inserts(rows: list[ResultRow]) -> None:
    """SQLite: multi-row INSERTs of the results that return the new ones (skipping any stored
    before), then of the violations of the new fails, then the daily roll-up: a few
    statements per batch of thousands of rows, as on PostgreSQL."""
    new = insert_rows(INSERT_RESULTS_SQLITE, [_sqlite_result(row) for row in rows], RESULT_COUNT)
    by_pair = {(row.trace_id, row.revision_id): row for row in rows if row.status == "fail" and not row.shadow}
    violations = [
        _sqlite_violation(by_pair[(trace, revision)], pk) for pk, trace, revision in new if (trace, revision) in by_pair
    ]
    counted = Counter(insert_rows(INSERT_VIOLATIONS_SQLITE, violations, VIOLATION_COUNT))
    day = timezone.localdate(rows[0].created_at)
    violation_days.add_counts(
        [
            (tenant, guardrail, revision, severity, day, n)
            for (tenant, guardrail, revision, severity), n in counted.items()
        ]
    )


INSERT_RESULTS_SQLITE = (
    f"INSERT INTO {EvaluationResult._meta.db_table} ({RESULT_COLUMNS}) VALUES {{values}}"  # noqa: S608
    " ON CONFLICT DO NOTHING RETURNING id, trace_id, revision_id"
)
INSERT_VIOLATIONS_SQLITE = (
    f"INSERT INTO {Violation._meta.db_table} ({VIOLATION_COLUMNS}) VALUES {{values}}"  # noqa: S608
    " ON CONFLICT DO NOTHING RETURNING tenant_id, guardrail_id, revision_id, severity"
)


def insert_rows(statement: str, rows: Sequence[tuple[Any, ...]], width: int) -> list[tuple[Any, ...]]:
    """SQLite: insert `rows` of `width` values with as few statements as its limits allow
    (`statement` has `{values}` where the rows go); the rows the statements return."""
    limit = min(MANY_ROWS, _sqlite_variable_limit() // width)
    returned: list[tuple[Any, ...]] = []
    with connection.cursor() as cursor:
        for start in range(0, len(rows), limit):
            batch = rows[start : start + limit]
            cursor.execute(
                statement.format(values=_value_lists(len(batch), width)), [value for row in batch for value in row]
            )
            returned.extend(tuple(row) for row in cursor.fetchall())
    return returned


def _sqlite_variable_limit() -> int:
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
    return (*row[:10], created, row.skip_reason, row.shadow)


def _sqlite_violation(row: ResultRow, result_id: int) -> tuple[Any, ...]:
    created = connection.ops.adapt_datetimefield_value(row.created_at)
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
        created,
        "open",
        "",
        "",
    )


# ---------------------------------------------------------------------------- withholding


def withhold_outputs(trace_ids: Sequence[int]) -> None:
    """Drop the stored responses of these traces (a halt guardrail failed), in one statement
    (on SQLite, one per as many keys as a statement takes)."""
    if not trace_ids:
        return
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute(
                f"UPDATE {RunTrace._meta.db_table} SET document = document - 'output', withheld = true "  # noqa: S608
                "WHERE id = ANY(%s)",
                [list(trace_ids)],
            )
        return
    limit = _sqlite_variable_limit()
    with connection.cursor() as cursor:
        for start in range(0, len(trace_ids), limit):
            keys = list(trace_ids[start : start + limit])
            cursor.execute(
                f"UPDATE {RunTrace._meta.db_table} SET document = json_remove(document, '$.output'),"  # noqa: S608
                f" withheld = 1 WHERE id IN ({', '.join(['%s'] * len(keys))})",
                keys,
            )
