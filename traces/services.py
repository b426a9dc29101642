"""Evaluating stored traces and recording results and violations.

Every server path evaluates with the deployment's engine (`guardrails.deployment.engine`:
the built-in and pack checks, the sandboxed zero-llm strategy, the judge) in a context
whose services come from `evaluation_services`. The runtime verdict (`POST evaluate`),
ingestion and evaluation runs share `record_results`; ingestion queues its traces with
`queue_runtime_evaluation`: one background task per ingested batch.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from django.db import transaction
from django.db.models import Max
from django.utils import timezone

from guardrails import deployment
from guardrails.engine.evaluate import evaluate_all
from guardrails.engine.types import Context, Mode, Result, Trace, TurnVerdict
from guardrails.services import Enforced, enforced_guardrails
from traces.models import Evaluation, EvaluationResult, RunTrace, Violation


def evaluation_services(tenant: str | None, evaluation: Evaluation | None = None) -> dict[str, Any]:
    """What strategies are handed in `context.services`, on every server path.

    The deployment's services for the tenant (`deployment.evaluation_services`: the sandbox
    pool, the judge); `evaluation` is the run the calls belong to, when there is one, for
    services that record per run (the judge cost ledger).
    """
    return deployment.evaluation_services(tenant)


def evaluation_context(document: Trace, mode: Mode, *, evaluation: Evaluation | None = None) -> Context:
    """The context a stored or incoming trace is evaluated in."""
    return Context.for_trace(document, mode, **evaluation_services(document.get("tenant"), evaluation))


def runtime_verdict(document: Trace, enforced: Sequence[Enforced]) -> TurnVerdict:
    """The runtime verdict of the enforced guardrails on one trace."""
    context = evaluation_context(document, "runtime")
    guardrails = [item.guardrail for item in enforced]
    return evaluate_all(guardrails, document, context, engine=deployment.engine())


def queue_runtime_evaluation(trace_ids: Sequence[int]) -> None:
    """Evaluate newly stored traces in mode `runtime` in the background: one task per batch,
    sent once the transaction that stored them commits."""
    from traces.tasks import evaluate_ingested

    ids = list(trace_ids)
    if ids:
        transaction.on_commit(lambda: evaluate_ingested.delay(ids))


def evaluate_stored_traces(trace_ids: Sequence[int]) -> int:
    """Evaluate the traces (those still there) in mode `runtime` with every enforced guardrail.

    As at `POST evaluate`, a trace that a `halt` guardrail fails keeps its other fields and
    loses its response (`withheld`). Idempotent: a result of no run is unique per trace and
    revision. Returns how many traces were evaluated.
    """
    enforced = enforced_guardrails()
    traces = RunTrace.objects.filter(pk__in=list(trace_ids)).order_by("pk")
    if not enforced:
        return traces.count()
    verdicts = []
    for trace in list(traces):  # one ingested batch: read whole before anything is written
        verdict = runtime_verdict(trace.document, enforced)
        if verdict.withheld and not trace.withheld:
            withhold_stored_output(trace)
        verdicts.append((trace, verdict.results))
    record_results(verdicts, enforced, mode="runtime")
    return len(verdicts)


def withhold_stored_output(trace: RunTrace) -> None:
    """Drop a stored trace's response (a halt guardrail failed); its hash stays the received one."""
    trace.document = {key: value for key, value in trace.document.items() if key != "output"}
    trace.withheld = True
    RunTrace.objects.filter(pk=trace.pk).update(document=trace.document, withheld=True)


def record_results(
    verdicts: Iterable[tuple[RunTrace, Sequence[Result]]],
    enforced: Sequence[Enforced],
    *,
    mode: Mode,
    evaluation: Evaluation | None = None,
) -> None:
    """Store each result that is not `skipped`, and a violation for each `fail`.

    Repeating this for the same traces, revisions and run stores nothing twice.
    """
    revisions = {item.guardrail.id: item.revision for item in enforced}
    now = timezone.now()
    rows = [
        _result_row(trace, result, revisions[result.guardrail], mode, evaluation, now)
        for trace, results in verdicts
        for result in results
        if result.status != "skipped" and result.guardrail in revisions
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
) -> EvaluationResult:
    return EvaluationResult(
        tenant_id=trace.tenant_id,
        trace=trace,
        guardrail_id=revision.guardrail_id,
        revision=revision,
        evaluation=evaluation,
        mode=mode,
        status=result.status,
        reason=result.reason or "",
        duration_ms=result.duration_ms,
        details=dict(result.details),
        created_at=now,
    )


def _record_violations(trace_ids: list[int], evaluation: Evaluation | None, now: Any, floor: int) -> None:
    failures = (
        EvaluationResult.objects.filter(
            pk__gt=floor, trace_id__in=set(trace_ids), evaluation=evaluation, status="fail",
            violation__isnull=True,
        )
        .select_related("trace", "revision")
        .only("pk", "tenant_id", "trace_id", "guardrail_id", "revision_id", "evaluation_id", "mode",
              "reason", "trace__agent", "trace__flow", "revision__document")
    )
    Violation.objects.bulk_create(
        [_violation_row(result, now) for result in failures], ignore_conflicts=True
    )


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
