"""Reading stored traces and writing results and violations in bulk, in a few queries per batch.

Every server path that stores results (evaluation runs, the runtime evaluation of ingested
batches, `POST evaluate`) writes them here, so the number of queries per batch does not
grow with its size:

- traces are read by keyset (primary key order), only the columns evaluation needs, the
  document as JSON text parsed with orjson rather than as model instances;
- on PostgreSQL the results go in with `COPY` into a temporary table, then one statement
  inserts them (skipping any stored before: results are unique per trace, revision and
  run), inserts a violation for each new `fail` whose finding (trace, revision) has none
  yet (one violation per finding: found again, it keeps its violation and its review) and
  returns the violations it inserted to count in the chart's daily roll-up; on SQLite,
  multi-row INSERTs that return the new results do the same in a few statements (as many
  rows in each as SQLite's limits allow).

Table and column names in the SQL here are the models' own; no input reaches them.
"""

from __future__ import annotations

import gc
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import datetime
from time import perf_counter
from typing import Any, NamedTuple, Protocol

import orjson
from django.db import connection, transaction
from django.db.models import F, QuerySet, TextField, Value
from django.db.models.functions import Cast, Greatest, Least
from django.utils import timezone

from guardrails.engine.evaluate import Engine, Plan
from guardrails.engine.types import Context, Mode, Result
from guardrails.services import Enforced
from kindgi_console import instruments
from traces.judge.services import EvaluationServices
from traces.models import Evaluation, EvaluationChunk, RunTrace, escalation_queue
from traces.store.bulk_postgres import write_with_copy
from traces.store.bulk_sqlite import sqlite_variable_limit, write_with_inserts
from traces.store.columns import ResultRow


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
    """Store each result, and a violation for each new `fail` not in shadow whose finding
    (trace, revision) has none yet; a `skipped` one only in a run (with why: `skip_reason`), for the run's results page.

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
    now: datetime | None = None,
    plans: dict[tuple[Any, Any, Any], Plan] | None = None,
) -> list[ResultRow]:
    """Evaluate each guardrail over each trace straight into the rows to store: the
    engine's verdict and its duration, as `evaluate_guardrail` gives them, without a Result
    object per evaluation (a run makes millions); `skipped` gives a row in a run only. A
    guardrail in shadow judges the traces it samples, and its fails are no violation.

    As the CI path does, the guardrails are planned once per (tenant, agent, flow) of the
    traces (`Engine.plan`: scope and checks resolved once), not for each trace.
    `mark_shadow`: a shadow guardrail's details say `shadow`, as the runtime verdict's do
    (`traces.ingest.evaluate.with_shadow`). `now` and `plans`: the batch's time and plans, given
    by a caller that evaluates a batch's traces a few at a time (on several threads)."""
    guardrails = [item.guardrail for item in enforced]
    targets = [(index, *_target(item), item.shadow, item) for index, item in enumerate(enforced)]
    keep_skipped = evaluation_id is not None
    now = now or timezone.now()
    plans = {} if plans is None else plans
    bound = services.bound()
    rows: list[ResultRow] = []
    append = rows.append
    new_row = tuple.__new__  # a ResultRow without the Python call of its __new__, per evaluation
    # Per guardrail, the last verdict and what it stores: a plan gives the same verdict
    # object for every pass and every skip of a context, so most are converted once.
    last: list[tuple[Any, str, str]] = [((), "", "{}")] * len(targets)
    for trace in traces:
        document = trace.document
        get = document.get
        key = (get("tenant"), get("agent"), get("flow"))
        plan = plans.get(key)
        if plan is None:
            plan = plans[key] = engine.plan(guardrails, Context(mode, *key, services=bound))
        verdict = plan.verdict
        tenant_id, trace_pk, agent, flow = trace.tenant_id, trace.pk, trace.agent or "", trace.flow or ""
        for index, guardrail_pk, revision_pk, action, severity, queue, shadow, item in targets:
            if shadow and not item.sampled(trace.trace_id):
                continue
            started = perf_counter()
            given = verdict(index, document)
            duration = (perf_counter() - started) * 1000
            status, reason, details = given
            if status == "skipped" and not keep_skipped:
                continue
            seen, skip, stored = last[index]
            if given is not seen or (shadow and mark_shadow):
                if shadow and mark_shadow:
                    details = {**details, "shadow": True}
                skip, stored = _stored_details(status, details)
                last[index] = (given, skip, stored)
            append(
                new_row(
                    ResultRow,
                    (
                        tenant_id,
                        trace_pk,
                        guardrail_pk,
                        revision_pk,
                        evaluation_id,
                        mode,
                        status,
                        reason or "",
                        duration,
                        stored,
                        now,
                        skip,
                        shadow,
                        "",  # the whole trace: no stage of a turn
                        0,
                        action,
                        severity,
                        queue,
                        agent,
                        flow,
                    ),
                )
            )
    ids = {guardrail_pk: item.guardrail.id for _, guardrail_pk, *_, item in targets}
    instruments.count_evaluations(((ids[row[2]], row[6]) for row in rows), mode)
    return rows


def _stored_details(status: str, details: Mapping[str, Any]) -> tuple[str, str]:
    """A result's `skip_reason` and its details as JSON text: a skipped one keeps only why."""
    if status == "skipped":
        return str(details.get("skip", "")), "{}"
    return "", orjson.dumps(dict(details)).decode() if details else "{}"


def store_rows(
    rows: list[ResultRow],
    *,
    while_running: int | None = None,
    fresh: bool = False,
    progress: tuple[int, int] | None = None,
) -> bool:
    """Store result rows and a violation for each new `fail` (see `record_results`);
    `while_running`: the run whose batch this is, written only while it is running.

    `progress`: (chunk, traces reached): the chunk's `progress` rises to the traces it has
    stored in the same transaction as their results, so that a run that ends (cancelled,
    failed) between two batches counts exactly the traces it stored."""
    with transaction.atomic():
        if while_running is not None and not run_is_live(while_running):
            return False
        write_rows(rows, fresh=fresh)
        if progress is not None:
            chunk_id, reached = progress
            EvaluationChunk.objects.filter(pk=chunk_id, status=EvaluationChunk.Status.RUNNING).update(
                progress=Least(F("size"), Greatest(F("progress"), Value(reached)))
            )
    return True


def write_rows(rows: list[ResultRow], *, fresh: bool = False) -> None:
    """Store result rows and their violations in the caller's transaction (no savepoint)."""
    if rows and connection.vendor == "postgresql":
        write_with_copy(rows, fresh)
    elif rows:
        write_with_inserts(rows)


@contextmanager
def without_cycle_collection() -> Iterator[None]:
    """Pause Python's cyclic garbage collector while a batch of traces is read, evaluated
    and written (a run's chunk, an ingested batch); restored after, as it was.

    Such a batch allocates hundreds of thousands of containers that hold no cycles (the
    parsed documents, the result rows) and frees them by reference counting; the collector,
    triggered every few hundred allocations, would scan them, and every long-lived object
    of the process, again and again: half the time of reading the traces. The little
    cyclic garbage a batch leaves is collected once the collector runs again.
    """
    paused = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if paused:
            gc.enable()


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


def result_rows(
    items: Sequence[tuple[TraceRow, Sequence[Result]]],
    enforced: Sequence[Enforced],
    mode: Mode,
    evaluation_id: int | None,
    stage: tuple[str, int] = ("", 0),
) -> list[ResultRow]:
    # By guardrail and revision: a guardrail in shadow beside its enforced revision gives a
    # result of each; a guardrail evaluated at one revision is found by its id alone.
    targets: dict[tuple[str, int | None], tuple[tuple[int, int, str, str, str | None], bool] | None] = {}
    for item in enforced:
        targets[(item.guardrail.id, item.guardrail.revision)] = (_target(item), item.shadow)
        key = (item.guardrail.id, None)
        targets[key] = None if key in targets else (_target(item), item.shadow)
    now = timezone.now()
    rows = []
    for trace, results in items:
        for result in results:
            found = targets.get((result.guardrail, result.revision)) or targets.get((result.guardrail, None))
            if found is None or (result.status == "skipped" and evaluation_id is None):
                continue
            (guardrail_pk, revision_pk, action, severity, queue), shadow = found
            skip, details = _stored_details(result.status, result.details)
            rows.append(
                ResultRow(
                    trace.tenant_id,
                    trace.pk,
                    guardrail_pk,
                    revision_pk,
                    evaluation_id,
                    mode,
                    result.status,
                    result.reason or "",
                    result.duration_ms,
                    details,
                    now,
                    skip,
                    shadow,
                    *stage,
                    action,
                    severity,
                    queue,
                    trace.agent or "",
                    trace.flow or "",
                )
            )
    return rows


def _target(item: Enforced) -> tuple[int, int, str, str, str | None]:
    """What a result row names of its guardrail: the guardrail and revision keys, and what
    a violation copies of the revision (its action, severity and review queue)."""
    revision = item.revision
    document = revision.document
    return (
        revision.guardrail_id,
        revision.pk,
        str(document["action"]["on-violation"]),
        str(document.get("severity") or ""),
        escalation_queue(document),
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
    limit = sqlite_variable_limit()
    with connection.cursor() as cursor:
        for start in range(0, len(trace_ids), limit):
            keys = list(trace_ids[start : start + limit])
            cursor.execute(
                f"UPDATE {RunTrace._meta.db_table} SET document = json_remove(document, '$.output'),"  # noqa: S608
                f" withheld = 1 WHERE id IN ({', '.join(['%s'] * len(keys))})",
                keys,
            )
