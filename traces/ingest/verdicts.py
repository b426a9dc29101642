"""Storing a runtime verdict (`POST evaluate`): the trace, its results, their violations and
the day's roll-up.

A runtime asks for a verdict before every agent turn, so on PostgreSQL all of it is one
statement, which is atomic without a transaction around it (no BEGIN and COMMIT round
trips): the trace is inserted unless its id is stored; the stored row's hash then tells a
duplicate (its results are added, as for a new trace) from a conflict (no results). The
results go in as one JSON array, so the statement's text is the same whatever their
number: the driver parses it once, and encoding the results is one orjson call.
Elsewhere, or when a judge call must be linked to the trace, the same writes are made in
one transaction by `ingest.store_one` and `bulk.write_rows`.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

import orjson
from django.db import connection, transaction
from django.utils import timezone

from guardrails.engine.types import Result
from guardrails.services import Enforced
from kindgi_console.db import prepared_cursor
from traces.ingest import documents, turns
from traces.models import RunTrace, ViolationDay
from traces.store import bulk, bulk_postgres
from traces.store.columns import RESULT, TRACE, VIOLATION, ResultRow, names

# What the statement gives each column that is not read from the results' recordset `l`
# (written per trace, or by the statement); every other column is `l.<column>`.
_TRACE_VALUES = {
    "tenant_id": "%(tenant)s",
    "trace_id": "%(trace_ref)s",
    "agent": "%(agent)s",
    "flow": "%(flow)s",
    "started_at": "%(started_at)s",
    "ended_at": "%(ended_at)s",
    "document": "%(document)s::jsonb",
    "content_hash": "%(content_hash)s",
    "withheld": "%(withheld)s",
    "received_at": "%(now)s",
}
_RESULT_GIVEN = {
    "tenant_id": "%(tenant)s",
    "trace_id": "t.id",
    "evaluation_id": "NULL",
    "mode": "%(mode)s",
    "created_at": "%(now)s",
}
_VIOLATION_GIVEN = {
    "tenant_id": "%(tenant)s",
    "trace_id": "n.trace_id",
    "result_id": "n.id",
    "evaluation_id": "NULL",
    "mode": "%(mode)s",
    "agent": "%(agent)s",
    "flow": "%(flow)s",
    "created_at": "%(now)s",
}
#: The columns of a result as the statement's JSON array gives them (`_result`).
RECORD = tuple(
    dict.fromkeys(
        column
        for table, given in ((RESULT, _RESULT_GIVEN), (VIOLATION, _VIOLATION_GIVEN))
        for column in table.written
        if column not in given
    )
)
_DAYS = ViolationDay._meta.db_table

# Table and column names come from the models (`traces.store.columns`): values go as parameters.
STORE_VERDICT = """
WITH trace AS (
  INSERT INTO {traces} ({trace_columns})
  VALUES ({trace_values})
  ON CONFLICT (tenant_id, trace_id) DO NOTHING
  RETURNING id
), stored AS (
  SELECT id, content_hash FROM {traces} WHERE tenant_id = %(tenant)s AND trace_id = %(trace_ref)s
), target AS (
  SELECT id FROM trace UNION ALL SELECT id FROM stored WHERE content_hash = %(content_hash)s
), load AS (
  SELECT * FROM jsonb_to_recordset(%(results)s::jsonb) AS l({record})
), new AS (
  INSERT INTO {results} ({result_columns})
  SELECT {result_values}
  FROM target t CROSS JOIN load l
  ON CONFLICT DO NOTHING
  RETURNING id, trace_id, revision_id, status, shadow
), violations AS (
  INSERT INTO {violations} ({violation_columns})
  SELECT {violation_values}
  FROM new n JOIN load l ON l.revision_id = n.revision_id
  WHERE n.status = 'fail' AND NOT n.shadow
  ORDER BY n.revision_id
  ON CONFLICT DO NOTHING
  RETURNING tenant_id, guardrail_id, revision_id, severity
), days AS (
  INSERT INTO {days} (tenant_id, guardrail_id, revision_id, severity, day, count, reviewed, false_positives)
  SELECT tenant_id, guardrail_id, revision_id, severity, %(day)s::date, count(*), 0, 0 FROM violations
  GROUP BY tenant_id, guardrail_id, revision_id, severity ORDER BY tenant_id, guardrail_id, revision_id, severity
  ON CONFLICT (tenant_id, guardrail_id, revision_id, severity, day) DO UPDATE SET count = {days}.count + excluded.count
)
SELECT (SELECT id FROM trace), (SELECT id FROM stored), (SELECT content_hash FROM stored)
"""


@functools.cache
def store_verdict_sql() -> str:
    """`STORE_VERDICT` with the models' columns and the recordset's types (made on first use)."""
    return STORE_VERDICT.format(
        traces=TRACE.table,
        trace_columns=names(TRACE.columns),
        trace_values=TRACE.values([_TRACE_VALUES[column] for column in TRACE.written]),
        record=", ".join(f"{column} {bulk_postgres.loaded_type(column)}" for column in RECORD),
        results=RESULT.table,
        result_columns=names(RESULT.columns),
        result_values=RESULT.values([_RESULT_GIVEN.get(column, f"l.{column}") for column in RESULT.written]),
        violations=VIOLATION.table,
        violation_columns=names(VIOLATION.columns),
        violation_values=VIOLATION.values(
            [_VIOLATION_GIVEN.get(column, f"l.{column}") for column in VIOLATION.written]
        ),
        days=_DAYS,
    )


def store_verdict(
    item: documents.Item,
    results: Sequence[Result],
    enforced: Sequence[Enforced],
    judge: Any,
    stage: tuple[str, int] = ("output", 0),
) -> None:
    """Store a valid trace of `POST evaluate` and, unless another trace has its id, the
    verdict's results and violations, all or nothing; sets the item's status and row.

    `judge`: the evaluation's judge service, whose calls (if any) are linked to the trace.
    `stage`: the stage of the turn checked and its step (`guardrails.engine.stages`), which
    the results are stored under. A document that extends the trace stored under its id
    (the same turn, checked at a later stage) replaces it and adds its results
    (`turns.extend_stored`); one that rewrites it is a conflict and stores nothing.
    """
    if connection.vendor == "postgresql" and not judge.recorded and _in_one_statement(item, results, enforced, stage):
        if item.status == documents.CONFLICT:
            with transaction.atomic():
                if turns.extend_stored(item):
                    _write_results(item, results, enforced, judge, stage)
        return
    with transaction.atomic():
        documents.store_one(item)
        if item.status == documents.CONFLICT and item.row_id is not None:
            turns.extend_stored(item)
        if item.row_id is not None and item.status != documents.CONFLICT:
            _write_results(item, results, enforced, judge, stage)


def _write_results(
    item: documents.Item, results: Sequence[Result], enforced: Sequence[Enforced], judge: Any, stage: tuple[str, int]
) -> None:
    assert item.row_id is not None
    trace = _trace(item, item.row_id)
    bulk.write_rows(bulk.result_rows([(trace, results)], enforced, "runtime", None, stage))
    judge.attach_trace(trace)


def _in_one_statement(
    item: documents.Item, results: Sequence[Result], enforced: Sequence[Enforced], stage: tuple[str, int]
) -> bool:
    """PostgreSQL: everything in `STORE_VERDICT`. False, with nothing written, when the id's
    row was committed by another request while the statement ran (neither inserted nor
    read): the caller stores it again, in a transaction that then reads that row."""
    if item.status != documents.CREATED:
        return False
    now = timezone.now()
    rows = bulk.result_rows([(_trace(item, None), results)], enforced, "runtime", None, stage)
    with prepared_cursor() as cursor:
        cursor.execute(store_verdict_sql(), _parameters(item, rows, now))
        inserted, stored, digest = cursor.fetchone()
    if inserted is not None:
        item.row_id = inserted
        return True
    if stored is None:
        return False
    item.row_id = stored
    documents._compare(item, digest)
    return True


def _trace(item: documents.Item, pk: int | None) -> RunTrace:
    document = item.document or {}
    assert item.tenant is not None
    return RunTrace(
        pk=pk,
        tenant=item.tenant,
        trace_id=item.id or "",
        agent=document.get("agent") or "",
        flow=document.get("flow") or "",
    )


def _parameters(item: documents.Item, rows: list[ResultRow], now: Any) -> dict[str, Any]:
    tenant, trace_ref, agent, flow, started_at, ended_at, document, digest, withheld, _ = documents._copy_row(item, now)
    return {
        "tenant": tenant,
        "trace_ref": trace_ref,
        "agent": agent,
        "flow": flow,
        "started_at": started_at,
        "ended_at": ended_at,
        "document": document,
        "content_hash": digest,
        "withheld": withheld,
        "now": now,
        "mode": "runtime",
        "day": timezone.localdate(now),
        "results": orjson.dumps([_result(row) for row in rows]).decode(),
    }


def _result(row: ResultRow) -> dict[str, Any]:
    """A result as the statement's recordset reads it: its `RECORD` columns, the details as they are."""
    record = {column: getattr(row, column) for column in RECORD}
    record["details"] = orjson.Fragment(row.details)
    return record
