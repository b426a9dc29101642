"""The columns the bulk writers write, one declaration per table, read from the models' `_meta`.

The writers that bypass the ORM for speed (COPY and multi-row INSERTs of results and
violations, ingestion's insert of traces, the runtime verdict's one statement) name their
columns here, never by hand: each table lists the columns a writer gives a value per row
(`written`, in the order of its rows), and every other column is either nullable, left to
the database's own default, or filled with the field's default (`defaulted`: a violation's
state `open`, its empty review label and note). A field added to a model without a default
stops the import here (`TableColumns.of`), and `tests/traces/test_store_columns.py` ties
the rows each writer stores to those the ORM would.

Types for the SQL of PostgreSQL come from `field.db_type(connection)`; they are read on the
first use, on the connection the statement runs on (see `traces.store.bulk_postgres`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from enum import Enum
from functools import cached_property
from typing import Any, NamedTuple

from django.db.models import NOT_PROVIDED, Field, Model

from traces.models import EvaluationResult, RunTrace, Violation


class ResultRow(NamedTuple):
    """One result to store, in `RESULT.written` order, then what its violation copies
    (the guardrail's action, severity and review queue, the trace's agent and flow)."""

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
    stage: str  # the stage of the turn a runtime checked, and its step: "" and 0, the whole trace
    step: int
    action: str
    severity: str
    queue: str | None  # the revision's review queue (`escalation_queue`), None: none
    agent: str
    flow: str


@dataclass(frozen=True)
class TableColumns:
    """The columns one writer writes into one model's table.

    `written`: the columns given a value per row, in the order of the writer's rows;
    `defaulted`: (column, value) of the columns given their field's default, the same for
    every row. The table's other columns are the primary key, nullable ones (NULL) and those
    with a database default.
    """

    model: type[Model]
    written: tuple[str, ...]
    defaulted: tuple[tuple[str, Any], ...]

    @classmethod
    def of(cls, model: type[Model], written: Sequence[str]) -> TableColumns:
        """The table of `model` whose writer gives `written` columns: the rest from `_meta`."""
        fields = {str(field.column): field for field in model._meta.concrete_fields}
        unknown = [column for column in written if column not in fields]
        if unknown:
            raise LookupError(f"{model.__name__} has no column {', '.join(unknown)}")
        left = [(column, field) for column, field in fields.items() if column not in written and not field.primary_key]
        return cls(model, tuple(written), tuple((column, _default(field)) for column, field in left if _filled(field)))

    @property
    def table(self) -> str:
        return str(self.model._meta.db_table)

    @cached_property
    def width(self) -> int:
        """How many values a written row has."""
        return len(self.written)

    @cached_property
    def columns(self) -> tuple[str, ...]:
        """Every column this writer names in its INSERT or COPY: written, then defaulted."""
        return self.written + tuple(column for column, _ in self.defaulted)

    @cached_property
    def default_values(self) -> tuple[Any, ...]:
        """The defaulted columns' values, to follow a written row's own (a COPY, SQLite)."""
        return tuple(value for _, value in self.defaulted)

    def values(self, written: Sequence[str]) -> str:
        """A row's SQL values in `columns` order: `written`, an expression per written column
        (`%s`, `l.reason`), then the defaults as literals."""
        if len(written) != self.width:
            raise ValueError(f"{self.table} takes {self.width} written values, not {len(written)}")
        return ", ".join([*written, *(_literal(value) for value in self.default_values)])

    def field(self, column: str) -> Field[Any, Any]:
        return next(field for field in self.model._meta.concrete_fields if field.column == column)

    def db_type(self, column: str, connection: Any) -> str:
        """The column's type on `connection`, as its field declares it (`varchar(200)`, `jsonb`)."""
        return str(self.field(column).db_type(connection))

    def copy_types(self, connection: Any) -> tuple[str, ...]:
        """The columns' types as a binary COPY names them (psycopg's names: `varchar`, not `varchar(200)`)."""
        return tuple(self.db_type(column, connection).split("(")[0] for column in self.columns)


def names(columns: Sequence[str], prefix: str = "") -> str:
    """Columns as an SQL list: `a, b` (`prefix` "l.": `l.a, l.b`)."""
    return ", ".join(prefix + column for column in columns)


def _literal(value: Any) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        return "'" + value.replace("'", "''") + "'"
    raise TypeError(f"no SQL literal for a default of type {type(value).__name__}")


def _filled(field: Field[Any, Any]) -> bool:
    """Whether a column left by the writer is given its field's default in the statement:
    not when the database fills it (a database default, or NULL for a nullable field
    without a default of its own)."""
    if field.db_default is not NOT_PROVIDED:
        return False
    return not (field.null and field.get_default() is None)


def _default(field: Field[Any, Any]) -> Any:
    """The field's default for every row: a constant, of a field that has one or may be blank
    (its empty value), and not NULL for a non-null column."""
    if field.has_default() and callable(field.default):
        raise ValueError(f"{field} has a default computed per row: its writers must write it")
    value = field.get_default()
    if not field.has_default() and not field.blank:
        # Django would store "" (or NULL) for it, which its own validation refuses.
        raise ValueError(f"{field} is required and has no default: its writers must write it")
    if value is None and not field.null:
        raise ValueError(f"{field} is not null and has no default: its writers must write it")
    value = field.get_prep_value(value)
    return value.value if isinstance(value, Enum) else value  # "open", not Violation.State.OPEN


# Results: every column (a result has nothing left to its defaults).
RESULT = TableColumns.of(EvaluationResult, ResultRow._fields[: ResultRow._fields.index("action")])
# A result's violation: the result's trace, guardrail and run columns and their copies;
# its review (state, reviewer, note) starts at the field's defaults.
VIOLATION = TableColumns.of(
    Violation,
    (
        "tenant_id",
        "trace_id",
        "result_id",
        "guardrail_id",
        "revision_id",
        "evaluation_id",
        "action",
        "severity",
        "queue",
        "mode",
        "reason",
        "agent",
        "flow",
        "created_at",
    ),
)
# Traces as ingestion stores them (`traces.ingest.documents`): no upload.
TRACE = TableColumns.of(
    RunTrace,
    (
        "tenant_id",
        "trace_id",
        "agent",
        "flow",
        "started_at",
        "ended_at",
        "document",
        "content_hash",
        "withheld",
        "received_at",
    ),
)


def violation_row(row: ResultRow, result_id: int, created_at: Any) -> tuple[Any, ...]:
    """The values of a new fail's violation, in `VIOLATION.columns` order (`created_at` as
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
        row.queue,
        row.mode,
        row.reason,
        row.agent,
        row.flow,
        created_at,
        *VIOLATION.default_values,
    )
