"""Evaluating stored traces and recording results and violations.

Every server path evaluates with the deployment's engine (`guardrails.deployment.engine`:
the built-in and pack checks, the sandboxed zero-llm strategy, the judge) in a context
whose services come from `evaluation_services`. The runtime verdict (`POST evaluate`),
ingestion and evaluation runs share `record_results`; ingestion queues its traces with
`queue_runtime_evaluation`: one background task per ingested batch.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from django.db import connection

from guardrails import deployment
from guardrails.engine.evaluate import evaluate_all, evaluate_guardrail
from guardrails.engine.judge import KIND as JUDGE_KIND
from guardrails.engine.stages import Stage, skipped_at_stage, stage_view
from guardrails.engine.types import Context, Mode, Result, Trace, TurnVerdict
from guardrails.models import Guardrail
from guardrails.services import Enforced, enforced_guardrails
from kindgi_console.db import repeated_cursor
from kindgi_console.tenancy.models import Tenant
from traces.ingest import outbox
from traces.judge.services import EvaluationServices, evaluation_services
from traces.models import Evaluation, RunTrace
from traces.store import bulk
from traces.store.columns import ResultRow

# What selects the enforced guardrails, and each one's revision, last change, owner, shadow
# state and stages: when these rows are the same as at the last read, so are the enforced guardrails.
ENFORCED_STAMP = (
    "SELECT id, revision, updated_at, tenant_id, shadow, shadow_sample_rate, enforced_revision, stages, on_error "  # noqa: S608
    f"FROM {Guardrail._meta.db_table} "
    "WHERE enabled = %s AND deleted_at IS NULL ORDER BY id"
)
#: The same rows on PostgreSQL as one value (the md5 of their text), a scalar subquery that
#: `POST evaluate` reads in the API key's own statement (`kindgi_console.api.ridden`).
ENFORCED_STAMP_VALUE = (
    "SELECT md5(coalesce(string_agg(row(id, revision, updated_at, tenant_id, shadow, "  # noqa: S608
    "shadow_sample_rate, stages, on_error)::text, ',' ORDER BY id), '')) "
    f"FROM {Guardrail._meta.db_table} WHERE enabled AND deleted_at IS NULL"
)
_enforced: tuple[tuple[Any, ...], list[Enforced]] | None = None


def enforced_stamp_value() -> str | None:
    """`ENFORCED_STAMP_VALUE` where the database has it (PostgreSQL), else None."""
    return ENFORCED_STAMP_VALUE if connection.vendor == "postgresql" else None


def enforced_now(tenant: Tenant | None, stamp: str | None = None) -> list[Enforced]:
    """The guardrails enforced on a trace of `tenant` (`enforced_guardrails(tenant)`: the
    console-wide ones and the tenant's own; None: console-wide only). Every enforced
    guardrail is kept for the process and read again only when their stamp changed: one
    small query per request instead of the revisions, and every compiled check reused
    (`POST evaluate`). `stamp`: `ENFORCED_STAMP_VALUE` as the request read it already."""
    global _enforced
    if stamp is None:
        stamp = _read_stamp()
    key = (connection.alias, connection.settings_dict["NAME"], stamp)
    kept = _enforced
    if kept is not None and kept[0] == key:
        deployment.load_filesystem_checks(item.guardrail for item in kept[1])
        every = kept[1]
    else:
        every = enforced_guardrails()
        _enforced = (key, every)
    owner = tenant.pk if tenant is not None else None
    return [item for item in every if item.revision.guardrail.tenant_id in (None, owner)]


def _read_stamp() -> Any:
    with repeated_cursor() as cursor:
        value = enforced_stamp_value()
        if value is not None:
            cursor.execute(value)
            return cursor.fetchone()[0]
        cursor.execute(ENFORCED_STAMP, [True])
        return tuple(cursor.fetchall())


def runtime_verdict(
    document: Trace,
    enforced: Sequence[Enforced],
    services: EvaluationServices | None = None,
    *,
    deadline: float | None = None,
    stage: Stage = "output",
) -> TurnVerdict:
    """The runtime verdict of the enforced guardrails on one trace at one stage of its turn.

    `services` are the evaluation's (`evaluation_services`); without them the verdict
    builds its own for this one trace and closes them. Guardrails still to be evaluated at
    `deadline` (a time.monotonic() instant) are errors with reason "deadline". The
    guardrails that do not apply at `stage` are skipped (reason `stage`), in their place.
    """
    applying = [item for item in enforced if stage in item.stages]
    if len(applying) == len(enforced):
        return verdict_of(stage_view(document, stage), enforced, "runtime", services, deadline=deadline)
    verdict = verdict_of(stage_view(document, stage), applying, "runtime", services, deadline=deadline)
    return replace(verdict, results=_with_stage_skips(verdict.results, enforced, stage))


def _with_stage_skips(results: Sequence[Result], enforced: Sequence[Enforced], stage: Stage) -> list[Result]:
    """The results of the guardrails that apply at `stage`, with the others skipped, in the
    enforced order (shadow results, which `with_shadow` appends, stay last)."""
    given = iter(results)
    merged = [
        next(given) if stage in item.stages else skipped_at_stage(item.guardrail, stage)
        for item in enforced
        if not item.shadow
    ]
    return [*merged, *given]


def verdict_of(
    document: Trace,
    enforced: Sequence[Enforced],
    mode: Mode,
    services: EvaluationServices | None = None,
    *,
    deadline: float | None = None,
) -> TurnVerdict:
    """The enforced guardrails' verdict on one trace in `mode`, with the evaluation's services."""
    if services is None:
        with evaluation_services(document.get("tenant")) as own:
            return verdict_of(document, enforced, mode, own, deadline=deadline)
    context = services.context(document, mode)
    guardrails = [item.guardrail for item in enforced if not item.shadow]
    verdict = evaluate_all(guardrails, document, context, engine=deployment.engine(), deadline=deadline)
    return with_shadow(failed_closed(verdict, enforced, mode), document, enforced, context)


def failed_closed(verdict: TurnVerdict, enforced: Sequence[Enforced], mode: Mode) -> TurnVerdict:
    """The verdict with the turn failed when a guardrail whose fail mode is `halt` gave
    `error` at runtime (and nothing halted it already): the verdict names it and its error."""
    if mode != "runtime" or verdict.turn == "failed":
        return verdict
    closed = {item.guardrail.id for item in enforced if not item.shadow and item.halts_on_error}
    erred = next((r for r in verdict.results if r.status == "error" and r.guardrail in closed), None)
    if erred is None:
        return verdict
    error = {"guardrail": erred.guardrail, "message": erred.reason or "error"}
    return replace(verdict, turn="failed", reason="guardrail-error", error=error)


def with_shadow(verdict: TurnVerdict, document: Trace, enforced: Sequence[Enforced], context: Context) -> TurnVerdict:
    """The verdict with the results of the shadow guardrails that sample this trace added
    (marked `details.shadow`): they are recorded and shown, and never decide the turn."""
    shadows = [item.guardrail for item in enforced if item.shadow and item.sampled(document.get("id"))]
    if not shadows:
        return verdict
    extra = [evaluate_guardrail(g, document, context, engine=deployment.engine()) for g in shadows]
    marked = [replace(result, details={**result.details, "shadow": True}) for result in extra]
    return replace(verdict, results=[*verdict.results, *marked])


def queue_runtime_evaluation(trace_ids: Sequence[int]) -> None:
    """Evaluate newly stored traces in mode `runtime` in the background: one task per batch,
    recorded in the outbox with the traces and sent once their transaction commits."""
    outbox.queue_runtime_evaluation(trace_ids)


def evaluate_stored_traces(trace_ids: Sequence[int]) -> int:
    """Evaluate the traces (those still there) in mode `runtime` with every enforced guardrail.

    As at `POST evaluate`, a trace that a `halt` guardrail fails keeps its other fields and
    loses its response (`withheld`). Idempotent: a result of no run is unique per trace and
    revision. Returns how many traces were evaluated. A few queries whatever the batch's
    size: the guardrails, the traces (keyset, documents parsed with orjson), the results.
    """
    enforced = enforced_guardrails()
    ids = sorted(set(trace_ids))
    if not enforced or not ids:
        return 0
    evaluated = 0
    selection = RunTrace.objects.filter(pk__in=ids)
    with bulk.without_cycle_collection():
        for batch in bulk.stored_traces(selection, max(len(ids), 1)):
            rows = runtime_rows(batch, enforced)
            # An ingested batch is evaluated once (a redelivered task finds its results stored).
            bulk.store_rows(rows, fresh=True)
            bulk.withhold_outputs(sorted({row.trace_id for row in rows if halts(row)}))
            evaluated += len(batch)
    return evaluated


def runtime_rows(traces: Sequence[bulk.StoredTrace], enforced: Sequence[Enforced]) -> list[ResultRow]:
    """The runtime verdicts of stored traces as rows to store, planned per (tenant, agent,
    flow) as a run's are (`bulk.evaluate_rows`), with one set of evaluation services (one
    judge client; each trace's own tenant routes its judge calls)."""
    with evaluation_services(None) as services:
        if any(item.guardrail.kind == JUDGE_KIND for item in enforced):
            services.know_traces(traces)
        return bulk.evaluate_rows(deployment.engine(), enforced, traces, "runtime", None, services, mark_shadow=True)


def halts(row: ResultRow) -> bool:
    """Whether the result fails its trace's turn (`evaluate_all`): a `halt` guardrail, not in shadow, failed."""
    return row.status == "fail" and row.action == "halt" and not row.shadow


def evaluate_traces(
    traces: Sequence[Any],
    enforced: Sequence[Enforced],
    *,
    mode: Mode,
    evaluation: Evaluation | None = None,
    fresh: bool = False,
) -> list[tuple[Any, TurnVerdict]]:
    """Evaluate stored traces (RunTrace rows or `bulk.StoredTrace`s), store the results,
    return the verdicts.

    One set of evaluation services serves them all: judge models and policies are read
    once, one HTTP client is reused, and every judge call is charged in the ledger to
    the trace and to `evaluation` (a batch run) when given. `fresh`: their results are
    most likely not stored yet (written straight in, see `bulk.record_results`).
    """
    with evaluation_services(evaluation.tenant if evaluation is not None else None, evaluation=evaluation) as services:
        if any(item.guardrail.kind == JUDGE_KIND for item in enforced):
            services.know_traces(traces)
        verdicts = [(trace, verdict_of(trace.document, enforced, mode, services)) for trace in traces]
    results = [(trace, verdict.results) for trace, verdict in verdicts]
    bulk.record_results(results, enforced, mode=mode, evaluation=evaluation, fresh=fresh)
    return verdicts
