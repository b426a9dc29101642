"""The bulk writers' columns against the models: what they write is what the ORM would store.

The writers of results, violations and traces bypass the ORM (COPY, multi-row INSERTs, the
runtime verdict's one statement) with their columns from `traces.store.columns`. Each row
they store is compared, field by field, with an unsaved model instance given the same
written values (every other field at its model default): the same expected rows on SQLite
and on PostgreSQL, so the suite's two runs compare the two writers with each other.
"""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime
from types import SimpleNamespace
from typing import Any

import orjson
import pytest
from django.db import models
from django.utils import timezone

from guardrails.engine.types import Result
from guardrails.services import Enforced, enforced_guardrails
from kindgi_console.tenancy.models import Tenant
from tests.conftest import make_trace
from tests.traces.seed import run_trace
from traces.ingest import documents, verdicts
from traces.models import EvaluationResult, RunTrace, Violation
from traces.store import bulk, bulk_postgres, bulk_sqlite
from traces.store.columns import RESULT, TRACE, VIOLATION, ResultRow, TableColumns

on_postgresql = pytest.mark.postgresql("PostgreSQL's writer")
on_sqlite = pytest.mark.sqlite("SQLite's writer")

TABLES = [RESULT, VIOLATION, TRACE]


def stored(model: type[models.Model], queryset: Any, *, leave: tuple[str, ...] = ("id",)) -> list[dict[str, Any]]:
    """Every concrete field of the rows, as the ORM reads them, but `leave`, in key order."""
    names = [field.attname for field in model._meta.concrete_fields if field.attname not in leave]
    return list(queryset.order_by("pk").values(*names))


def by_result_key(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Rows in (trace, revision) order: an INSERT … SELECT keeps no order of its own."""
    return sorted(rows, key=lambda row: (row["trace_id"], row["revision_id"]))


def unsaved(model: type[models.Model], values: dict[str, Any], *, leave: tuple[str, ...] = ("id",)) -> dict[str, Any]:
    """What the ORM would store for these written values: the rest at the fields' defaults."""
    instance = model(**values)
    return {
        field.attname: getattr(instance, field.attname)
        for field in model._meta.concrete_fields
        if field.attname not in leave
    }


# ---------------------------------------------------------------------------- the declarations


@pytest.mark.parametrize("table", TABLES, ids=lambda table: table.table)
def test_it_writes_or_defaults_every_column_that_needs_a_value(table: TableColumns) -> None:
    for field in table.model._meta.concrete_fields:
        needs_value = not field.primary_key and not field.null and field.db_default is models.NOT_PROVIDED
        if needs_value:
            assert field.column in table.columns, f"{table.table}.{field.column} is neither written nor defaulted"
    for column, value in table.defaulted:
        assert value == table.field(column).get_default()
    assert len(set(table.columns)) == len(table.columns)


def test_a_result_row_is_the_results_columns_then_what_violations_copy() -> None:
    assert ResultRow._fields[: RESULT.width] == RESULT.written
    assert set(ResultRow._fields[RESULT.width :]) <= set(VIOLATION.written)
    assert {"action", "severity", "queue", "agent", "flow"} == set(ResultRow._fields[RESULT.width :])


def test_a_violations_review_starts_at_the_models_defaults() -> None:
    assert dict(VIOLATION.defaulted) == {"state": "open", "reviewed_by_label": "", "review_note": ""}
    assert type(dict(VIOLATION.defaulted)["state"]) is str  # psycopg would copy an enum by its name


def _with_field(model: type[models.Model], field: models.Field[Any, Any]) -> Any:
    """A stand-in for `model` with one more field, as a migration adding it would leave it."""
    field.set_attributes_from_name("added")
    meta = SimpleNamespace(concrete_fields=[*model._meta.concrete_fields, field], db_table=model._meta.db_table)
    return type(model.__name__, (), {"_meta": meta})


@pytest.mark.parametrize(
    "field",
    [models.CharField(max_length=20), models.DateTimeField(default=timezone.now), models.JSONField()],
    ids=["not null, no default", "a default per row", "json, no default"],
)
@pytest.mark.parametrize("table", TABLES, ids=lambda table: table.table)
def test_a_field_added_without_updating_the_writers_stops_them(
    table: TableColumns, field: models.Field[Any, Any]
) -> None:
    with pytest.raises(ValueError, match="added"):
        TableColumns.of(_with_field(table.model, field), table.written)


@pytest.mark.parametrize("table", TABLES, ids=lambda table: table.table)
def test_a_field_added_with_a_constant_default_is_written_with_it(table: TableColumns) -> None:
    wider = TableColumns.of(_with_field(table.model, models.CharField(max_length=20, default="low")), table.written)
    assert wider.defaulted == (*table.defaulted, ("added", "low"))
    nullable = TableColumns.of(_with_field(table.model, models.DateTimeField(null=True)), table.written)
    assert nullable.columns == table.columns  # NULL, as the database gives it


def test_a_column_the_model_lacks_is_refused() -> None:
    with pytest.raises(LookupError, match="priority"):
        TableColumns.of(Violation, (*VIOLATION.written, "priority"))


# ---------------------------------------------------------------------------- results and violations


STATUSES = ["fail", "pass", "fail", "error", "skipped", "fail"]
#: (stage, step) of a result: the whole trace, or a stage of its turn (`POST evaluate?stage=`).
STAGES = [("", 0), ("input", 0), ("tool-call", 2), ("output", 0)]


def batch(tenant: Tenant, enforced: list[Enforced], count: int, *, evaluation_id: int | None = None) -> list[ResultRow]:
    """`count` traces, each with a result per guardrail: fails (one in shadow), passes, errors, skips."""
    traces = RunTrace.objects.bulk_create(
        [run_trace(tenant, make_trace(f"cols-{n:04}", tenant=tenant.slug, flow="billing")) for n in range(count)]
    )
    now = datetime(2026, 12, 2, 10, 30, 15, 123456, tzinfo=UTC)
    rows = []
    for n, trace in enumerate(traces):
        for g, item in enumerate(enforced):
            status = STATUSES[(n + g) % len(STATUSES)]
            rows.append(
                ResultRow(
                    tenant.pk,
                    trace.pk,
                    item.revision.guardrail_id,
                    item.revision.pk,
                    evaluation_id,
                    "ci",
                    status,
                    f"it's {status}" if status != "pass" else "",
                    0.125 * (n + 1),
                    '{"skip": "flow"}' if status == "skipped" else '{"matched": ["refund"]}',
                    now,
                    "flow" if status == "skipped" else "",
                    n % 5 == 0,  # in shadow: no violation
                    *STAGES[n % len(STAGES)],
                    "halt" if g == 0 else "escalate" if g == 1 else "log-only",
                    "" if g == 2 else "high",
                    "billing-leads" if g == 1 else None,
                    trace.agent,
                    trace.flow,
                )
            )
    return rows


def expected_results(rows: list[ResultRow]) -> list[dict[str, Any]]:
    return [
        unsaved(
            EvaluationResult,
            {**dict(zip(RESULT.written, row[: RESULT.width], strict=True)), "details": orjson.loads(row.details)},
        )
        for row in rows
    ]


def expected_violations(rows: list[ResultRow]) -> list[dict[str, Any]]:
    written = [name for name in VIOLATION.written if name != "result_id"]
    fails = [row for row in rows if row.status == "fail" and not row.shadow]
    return [
        unsaved(Violation, {name: getattr(row, name) for name in written}, leave=("id", "result_id")) for row in fails
    ]


def assert_stored_as_the_orm_would(rows: list[ResultRow], tenant: Tenant) -> None:
    results = EvaluationResult.objects.filter(tenant=tenant)
    assert by_result_key(stored(EvaluationResult, results)) == by_result_key(expected_results(rows))
    violations = Violation.objects.filter(tenant=tenant)
    written = stored(Violation, violations, leave=("id", "result_id"))
    assert by_result_key(written) == by_result_key(expected_violations(rows))
    by_key = {(result.trace_id, result.revision_id): result.pk for result in results}
    assert [v.result_id for v in violations.order_by("pk")] == [
        by_key[(v.trace_id, v.revision_id)] for v in violations.order_by("pk")
    ]


@pytest.fixture
def enforced(acme: Tenant, guardrails: list[Any]) -> list[Enforced]:
    return enforced_guardrails(acme)


@on_sqlite
def test_it_stores_on_sqlite_what_the_orm_would(acme: Tenant, enforced: list[Enforced]) -> None:
    rows = batch(acme, enforced, 30)
    bulk_sqlite.write_with_inserts(rows)
    assert_stored_as_the_orm_would(rows, acme)


@on_postgresql
@pytest.mark.parametrize(
    ("count", "fresh"),
    [(30, True), (30, False), (bulk_postgres.FEW_ROWS // 3, False)],
    ids=["copied straight in", "through the load table", "as a VALUES list"],
)
def test_it_stores_on_postgresql_what_the_orm_would(
    acme: Tenant, enforced: list[Enforced], count: int, fresh: bool
) -> None:
    rows = batch(acme, enforced, count)
    assert (len(rows) > bulk_postgres.FEW_ROWS) == (count == 30)
    bulk_postgres.write_with_copy(rows, fresh)
    assert_stored_as_the_orm_would(rows, acme)


def test_it_stores_a_batch_once_whichever_writer(acme: Tenant, enforced: list[Enforced]) -> None:
    rows = batch(acme, enforced, 30)
    bulk.write_rows(rows, fresh=True)
    bulk.write_rows(rows)
    bulk.write_rows(rows[:10])
    assert_stored_as_the_orm_would(rows, acme)


# ---------------------------------------------------------------------------- traces and the verdict


def item(tenant: Tenant, trace_id: str) -> documents.Item:
    document = make_trace(trace_id, tenant=tenant.slug, startedAt="2026-12-02T10:00:00+02:00")
    canonical = orjson.dumps(document, option=orjson.OPT_SORT_KEYS)
    return documents.Item(
        0,
        trace_id,
        documents.CREATED,
        tenant=tenant,
        document=document,
        canonical=canonical,
        content_hash=hashlib.sha256(canonical).hexdigest(),
    )


def test_it_stores_traces_as_the_orm_would(acme: Tenant) -> None:
    items = [item(acme, f"t-{n}") for n in range(5)]
    documents.store(items)
    documents.store_one(item(acme, "t-one"))
    rows = stored(RunTrace, RunTrace.objects.filter(tenant=acme), leave=("id", "received_at"))
    expected = [
        unsaved(
            RunTrace,
            {
                "tenant_id": acme.pk,
                "trace_id": one.id,
                "agent": "support-bot",
                "flow": "refund",
                "started_at": datetime(2026, 12, 2, 8, 0, tzinfo=UTC),
                "ended_at": datetime(2026, 11, 29, 10, 0, 4, tzinfo=UTC),
                "document": one.document,
                "content_hash": one.content_hash,
            },
            leave=("id", "received_at"),
        )
        for one in [*items, item(acme, "t-one")]
    ]
    assert rows == expected


def verdict(enforced: list[Enforced]) -> list[Result]:
    statuses = ["fail", "pass", "error"]
    return [
        Result(
            guardrail=entry.guardrail.id,
            revision=entry.revision.pk,
            status=statuses[n % 3],  # type: ignore[arg-type]
            action="halt",
            severity="high",
            reason="it's so",
            duration_ms=0.5,
            details={"matched": ["refund"]},
        )
        for n, entry in enumerate(enforced)
    ]


def test_the_verdicts_statement_stores_what_the_bulk_writer_does(acme: Tenant, enforced: list[Enforced]) -> None:
    """On PostgreSQL the verdict is one statement; with a judge call to link (and on SQLite)
    it is `store_one` and `bulk.write_rows`: both store the same rows."""
    one, linked = item(acme, "v-statement"), item(acme, "v-linked")
    verdicts.store_verdict(
        one, verdict(enforced), enforced, SimpleNamespace(recorded=False, attach_trace=lambda trace: None)
    )
    verdicts.store_verdict(
        linked, verdict(enforced), enforced, SimpleNamespace(recorded=True, attach_trace=lambda trace: None)
    )
    leave = ("id", "trace_id", "created_at", "result_id")

    def of(model: type[models.Model], trace_ref: str) -> list[dict[str, Any]]:
        return stored(model, model.objects.filter(trace__trace_id=trace_ref), leave=leave)  # type: ignore[attr-defined]

    assert of(EvaluationResult, "v-statement") == of(EvaluationResult, "v-linked")
    assert of(Violation, "v-statement") == of(Violation, "v-linked")
    assert [v["state"] for v in of(Violation, "v-statement")] == ["open"]
    traces = stored(RunTrace, RunTrace.objects.filter(tenant=acme), leave=("id", "trace_id", "received_at", "document"))
    assert traces[0] == {**traces[1], "content_hash": one.content_hash}


@on_postgresql
def test_a_results_copy_cancelled_at_its_timeout_is_told_as_djangos_error(
    acme: Tenant, enforced: list[Enforced]
) -> None:
    """COPY runs on psycopg's own cursor: its errors are told as Django's, so that a deadline's
    cancel is one (`kindgi_console.deadline` tells a QueryCanceled under Django's
    OperationalError from any other) and the savepoint rolls it back."""
    import psycopg
    from django.db import OperationalError, connection

    from tests.traces.test_request_deadlines import held

    rows = batch(acme, enforced, 30)
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL statement_timeout = '300ms'")
    with (
        held(f"LOCK TABLE {EvaluationResult._meta.db_table} IN SHARE ROW EXCLUSIVE MODE"),
        pytest.raises(OperationalError) as raised,
    ):
        bulk_postgres.write_with_copy(rows, fresh=True)
    assert isinstance(raised.value.__cause__, psycopg.errors.QueryCanceled)
    assert not EvaluationResult.objects.exists()
