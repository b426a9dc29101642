"""What a run will ask judges, and what it will cost, before it starts."""

from __future__ import annotations

from collections.abc import Iterable
from decimal import Decimal
from typing import Any

from guardrails.engine.evaluate import selects
from guardrails.engine.judge import KIND as JUDGE_KIND
from guardrails.engine.judge import NoJudgeModel, estimate_call, route_for
from guardrails.engine.types import Context, Guardrail, Mode
from guardrails.models import JudgeCacheEntry
from traces.judge.services import ConsoleJudgeServices

#: At most this many traces are read to estimate a run; a larger selection is extrapolated.
ESTIMATE_SAMPLE = 500


def estimate_run(
    guardrails: Iterable[Guardrail], traces: Any, tenant: Any, *, mode: Mode = "ci", sample: int | None = None
) -> dict[str, Any]:
    """What a run of `guardrails` over the `traces` queryset (RunTrace rows) will ask judges.

    Returns ``{"calls", "cached", "costUsd", "traces", "sampled", "extrapolated", "models":
    {guardrail id: model id}, "errors": {guardrail id: why no judge}}``: `calls` are the judge
    calls still to pay (cache hits are `cached`, free), `costUsd` their upper estimate at the
    routed models' prices (engine estimate_call: the whole output limit used). Only llm-judge
    guardrails whose scope selects a trace count. At most `sample` (ESTIMATE_SAMPLE) traces,
    the newest, are read; for a larger selection the counts and the cost are scaled up to
    the whole selection and `extrapolated` is true. Queries: the trace count, the sample,
    the registry, the tenant's policy, and one cache lookup per guardrail.
    """
    limit = ESTIMATE_SAMPLE if sample is None else sample
    judged = [g for g in guardrails if g.kind == JUDGE_KIND]
    answer: dict[str, Any] = {
        "calls": 0,
        "cached": 0,
        "costUsd": "0",
        "traces": 0,
        "sampled": 0,
        "extrapolated": False,
        "models": {},
        "errors": {},
    }
    if not judged:
        return answer
    total = traces.count()
    rows = list(traces.order_by("-received_at", "-pk").values_list("document", flat=True)[:limit])
    answer.update(traces=total, sampled=len(rows), extrapolated=len(rows) < total)
    services = ConsoleJudgeServices(tenant=tenant)
    calls = cached = 0
    cost = Decimal(0)
    for guardrail in judged:
        try:
            model = route_for(services, guardrail, getattr(tenant, "slug", None))
        except NoJudgeModel as error:
            answer["errors"][guardrail.id] = str(error)
            continue
        answer["models"][guardrail.id] = model.id
        estimates = [
            estimate_call(guardrail, document, model)
            for document in rows
            if selects(guardrail, Context.for_trace(document, mode))
        ]
        hits = set(
            JudgeCacheEntry.objects.filter(key__in=[e.cache_key for e in estimates]).values_list("key", flat=True)
        )
        cached += sum(1 for e in estimates if e.cache_key in hits)
        paid = [e for e in estimates if e.cache_key not in hits]
        calls += len(paid)
        cost += sum((e.cost_usd for e in paid), Decimal(0))
    if answer["extrapolated"] and rows:
        scale = Decimal(total) / Decimal(len(rows))
        judgements = round((calls + cached) * scale)  # rounded once, so the parts add up
        cached = min(judgements, round(cached * scale))
        calls, cost = judgements - cached, cost * scale
    answer.update(calls=calls, cached=cached, costUsd=_cost_text(cost))
    return answer


def _cost_text(cost: Decimal) -> str:
    """An estimate to the millionth of a dollar, as a plain decimal string."""
    text = format(cost.quantize(Decimal("0.000001")), "f")
    return text.rstrip("0").rstrip(".") if "." in text else text
