"""Evaluating stored traces and recording results and violations.

Every server path evaluates with the deployment's engine (`guardrails.deployment.engine`:
the built-in and pack checks, the sandboxed zero-llm strategy, the judge) in a context
whose services come from `evaluation_services`. The runtime verdict (`POST evaluate`),
ingestion and evaluation runs share `record_results`; ingestion queues its traces with
`queue_runtime_evaluation`: one background task per ingested batch.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from django.db import transaction
from django.db.models import Max
from django.utils import timezone

from guardrails import deployment
from guardrails.deployment import close_services, evaluation_services
from guardrails.engine.evaluate import evaluate_all, evaluate_guardrail
from guardrails.engine.types import Context, Mode, Result, Trace, TurnVerdict
from guardrails.services import Enforced, enforced_guardrails
from traces import violation_days
from traces.models import Evaluation, EvaluationResult, RunTrace, Violation


def runtime_verdict(
    document: Trace,
    enforced: Sequence[Enforced],
    services: Mapping[str, Any] | None = None,
    *,
    deadline: float | None = None,
) -> TurnVerdict:
    """The runtime verdict of the enforced guardrails on one trace.

    `services` are the evaluation's (`evaluation_services`); without them the verdict
    builds its own for this one trace and closes them. Guardrails still to be evaluated at
    `deadline` (a time.monotonic() instant) are errors with reason "deadline".
    """
    return verdict_of(document, enforced, "runtime", services, deadline=deadline)


def verdict_of(
    document: Trace,
    enforced: Sequence[Enforced],
    mode: Mode,
    services: Mapping[str, Any] | None = None,
    *,
    deadline: float | None = None,
) -> TurnVerdict:
    """The enforced guardrails' verdict on one trace in `mode`, with the evaluation's services."""
    own = services is None
    bound = evaluation_services(document.get("tenant")) if services is None else services
    try:
        context = Context.for_trace(document, mode, **bound)
        guardrails = [item.guardrail for item in enforced if not item.shadow]
        verdict = evaluate_all(guardrails, document, context, engine=deployment.engine(), deadline=deadline)
        return with_shadow(verdict, document, enforced, context)
    finally:
        if own:
            close_services(dict(bound))


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
    from traces import outbox

    outbox.queue_runtime_evaluation(trace_ids)


def evaluate_stored_traces(trace_ids: Sequence[int]) -> int:
    """Evaluate the traces (those still there) in mode `runtime` with every enforced guardrail.

    As at `POST evaluate`, a trace that a `halt` guardrail fails keeps its other fields and
    loses its response (`withheld`). Idempotent: a result of no run is unique per trace and
    revision. Returns how many traces were evaluated.
    """
    enforced = enforced_guardrails()
    traces = list(RunTrace.objects.filter(pk__in=list(trace_ids)).select_related("tenant").order_by("pk"))
    if not enforced or not traces:
        return len(traces)
    verdicts = evaluate_traces(traces, enforced, mode="runtime")
    for trace, verdict in verdicts:
        if verdict.withheld and not trace.withheld:
            withhold_stored_output(trace)
    return len(verdicts)


def withhold_stored_output(trace: RunTrace) -> None:
    """Drop a stored trace's response (a halt guardrail failed); its hash stays the received one."""
    trace.document = {key: value for key, value in trace.document.items() if key != "output"}
    trace.withheld = True
    RunTrace.objects.filter(pk=trace.pk).update(document=trace.document, withheld=True)


def evaluate_traces(
    traces: Sequence[RunTrace],
    enforced: Sequence[Enforced],
    *,
    mode: Mode,
    evaluation: Evaluation | None = None,
) -> list[tuple[RunTrace, TurnVerdict]]:
    """Evaluate stored traces (rows with their tenant selected), store the results, return the verdicts.

    One set of evaluation services serves them all: judge models and policies are read
    once, one HTTP client is reused, and every judge call is charged in the ledger to
    the trace and to `evaluation` (a batch run) when given.
    """
    services = evaluation_services(evaluation.tenant if evaluation is not None else None,
                                   evaluation=evaluation)
    services["judge"].know_traces(traces)
    try:
        verdicts = [(trace, verdict_of(trace.document, enforced, mode, services)) for trace in traces]
    finally:
        close_services(services)
    results = [(trace, verdict.results) for trace, verdict in verdicts]
    record_results(results, enforced, mode=mode, evaluation=evaluation)
    return verdicts


def record_results(
    verdicts: Iterable[tuple[RunTrace, Sequence[Result]]],
    enforced: Sequence[Enforced],
    *,
    mode: Mode,
    evaluation: Evaluation | None = None,
) -> None:
    """Store each result, and a violation for each `fail`; a `skipped` one only in a run
    (with why), so that a run's results page can say why a guardrail skipped a trace.

    Repeating this for the same traces, revisions and run stores nothing twice.
    """
    revisions = {item.guardrail.id: item.revision for item in enforced}
    shadows = {item.guardrail.id for item in enforced if item.shadow}
    now = timezone.now()
    rows = [
        _result_row(trace, result, revisions[result.guardrail], mode, evaluation, now, result.guardrail in shadows)
        for trace, results in verdicts
        for result in results
        if (result.status != "skipped" or evaluation is not None) and result.guardrail in revisions
    ]
    if not rows:
        return
    with transaction.atomic():
        # A result stored before this call got its violation then (same transaction): only
        # the rows inserted now, above this key, need one. The key range keeps the look-up
        # as cheap for the millionth result as for the first.
        floor = EvaluationResult.objects.aggregate(top=Max("pk"))["top"] or 0
        EvaluationResult.objects.bulk_create(rows, ignore_conflicts=True)
        _record_violations([row.trace_id for row in rows], evaluation, now, floor)


def _result_row(
    trace: RunTrace,
    result: Result,
    revision: Any,
    mode: Mode,
    evaluation: Evaluation | None,
    now: Any,
    shadow: bool = False,
) -> EvaluationResult:
    return EvaluationResult(
        shadow=shadow,
        tenant_id=trace.tenant_id,
        trace=trace,
        guardrail_id=revision.guardrail_id,
        revision=revision,
        evaluation=evaluation,
        mode=mode,
        status=result.status,
        reason=result.reason or "",
        skip_reason=str(result.details.get("skip", "")) if result.status == "skipped" else "",
        duration_ms=result.duration_ms,
        details={} if result.status == "skipped" else dict(result.details),
        created_at=now,
    )


def _record_violations(trace_ids: list[int], evaluation: Evaluation | None, now: Any, floor: int) -> None:
    failures = (
        EvaluationResult.objects.filter(
            pk__gt=floor, trace_id__in=set(trace_ids), evaluation=evaluation, status="fail",
            violation__isnull=True, shadow=False,
        )
        .select_related("trace", "revision")
        .only("pk", "tenant_id", "trace_id", "guardrail_id", "revision_id", "evaluation_id", "mode",
              "reason", "trace__agent", "trace__flow", "revision__document")
    )
    rows = [_violation_row(result, now) for result in failures]
    Violation.objects.bulk_create(rows, ignore_conflicts=True)
    # Counted in the chart's roll-up in the same transaction: the rows this call stored
    # (a violation some other writer stored first has its own time, and was counted there).
    violation_days.add(Violation.objects.filter(
        result_id__in=[row.result_id for row in rows], created_at=now))


def _violation_row(result: EvaluationResult, now: Any) -> Violation:
    document = result.revision.document
    return Violation(
        tenant_id=result.tenant_id,
        trace_id=result.trace_id,
        result=result,
        guardrail_id=result.guardrail_id,
        revision_id=result.revision_id,
        evaluation_id=result.evaluation_id,
        action=str(document["action"]["on-violation"]),
        severity=str(document.get("severity") or ""),
        mode=result.mode,
        reason=result.reason,
        agent=result.trace.agent,
        flow=result.trace.flow,
        created_at=now,
    )
