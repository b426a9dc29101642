"""Loading the demo: whatever of it is missing, evaluated, dated, run, reviewed and calibrated."""

from __future__ import annotations

import hashlib
import random
from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import orjson
from django.contrib.auth.models import User
from django.db import transaction
from django.db.models import OuterRef, Subquery
from django.utils import timezone

from guardrails import deployment
from guardrails.engine.evaluate import evaluate_all
from guardrails.engine.types import Context
from guardrails.models import Guardrail, JudgeModelRegistration
from guardrails.services import enforced_guardrails
from kindgi_console.tenancy.models import Tenant
from kindgi_console.tenancy.scoping import Caller
from traces.demo.catalogue import REVIEW_NOTES, TRACES_PER_TENANT
from traces.demo.judge import DemoJudge
from traces.demo.maker import TraceMaker
from traces.demo.setup import ensure_guardrails, ensure_judge_models, ensure_people
from traces.judge import ledger
from traces.judge.services import evaluation_services
from traces.models import CalibrationSample, Evaluation, EvaluationResult, JudgeLedgerEntry, RunTrace, Violation
from traces.review import calibration, workflow
from traces.runs.evaluations import RunRequestError
from traces.store import violation_days
from traces.store.bulk import record_results


@dataclass
class Loaded:
    guardrails: int = 0
    traces: int = 0
    violations: int = 0
    ledger: int = 0
    reviews: int = 0


def load(*, now: datetime | None = None, sizes: dict[str, int] | None = None) -> Loaded:
    """Load whatever of the demo is missing; return what was added."""
    now = now or timezone.now()
    loaded = Loaded()
    with transaction.atomic():
        users = ensure_people()
        loaded.guardrails = ensure_guardrails(users["author"])
        judge_models = ensure_judge_models()
    enforced = enforced_guardrails()
    for slug, count in (sizes or TRACES_PER_TENANT).items():
        with transaction.atomic():
            _load_tenant(
                Tenant.objects.get(slug=slug),
                count,
                enforced,
                now,
                loaded,
                reviewer=users[f"{slug}-reviewer"],
                judge_models=judge_models,
            )
    _calibrate(Tenant.objects.get(slug="acme"), "support-tone-judge", "acme-reviewer")
    return loaded


def _calibrate(tenant: Tenant, guardrail_id: str, reviewer: str) -> None:
    """A labelled calibration sample of a judge, so that its agreement with people shows.

    The people mostly agree with the judge, and overturn one verdict in six either way.
    """
    guardrail = Guardrail.objects.filter(guardrail_id=guardrail_id).first()
    if guardrail is None or CalibrationSample.objects.filter(tenant=tenant, guardrail=guardrail).exists():
        return
    try:
        sample = calibration.create_sample(tenant, guardrail, 20, reviewer)
    except RunRequestError:
        return  # a demo too small to have verdicts to draw from
    rng = random.Random("kindgi-demo-calibration")
    for item in sample.items.order_by("pk"):
        overturned = rng.random() < 1 / 6
        label = {"pass": "fail", "fail": "pass"}[item.judge_status] if overturned else item.judge_status
        calibration.label_item(item, label, reviewer)


def _load_tenant(
    tenant: Tenant,
    count: int,
    enforced: list[Any],
    now: datetime,
    loaded: Loaded,
    *,
    reviewer: User,
    judge_models: dict[str, JudgeModelRegistration],
) -> None:
    rng = random.Random(f"kindgi-demo-{tenant.slug}")
    maker = TraceMaker(rng, tenant.slug, now)
    documents = [maker.make(number) for number in range(1, count + 1)]
    existing = set(
        RunTrace.objects.filter(tenant=tenant, trace_id__startswith="demo-").values_list("trace_id", flat=True)
    )
    documents = [d for d in documents if d["id"] not in existing]
    if not documents:
        return
    judge = DemoJudge(judge_models)
    engine = deployment.engine()
    # The console's services, with the demo's in-process judge in place of the providers.
    services = {"sandbox": deployment.sandbox_pool(), "judge": judge}
    guardrails = [item.guardrail for item in enforced]
    rows, verdicts = [], []
    for document in documents:
        verdict = evaluate_all(guardrails, document, Context.for_trace(document, "runtime", **services), engine=engine)
        digest = hashlib.sha256(orjson.dumps(document, option=orjson.OPT_SORT_KEYS)).hexdigest()
        stored = {k: v for k, v in document.items() if k != "output"} if verdict.withheld else document
        ended = datetime.fromisoformat(document["endedAt"].replace("Z", "+00:00"))
        rows.append(
            RunTrace(
                tenant=tenant,
                trace_id=document["id"],
                agent=document["agent"],
                flow=document.get("flow", ""),
                document=stored,
                content_hash=digest,
                withheld=verdict.withheld,
                started_at=datetime.fromisoformat(document["startedAt"].replace("Z", "+00:00")),
                ended_at=ended,
                received_at=ended + timedelta(milliseconds=rng.randint(20, 900)),
            )
        )
        verdicts.append(verdict.results)
    RunTrace.objects.bulk_create(rows, batch_size=500)
    stored_rows = RunTrace.objects.filter(tenant=tenant, trace_id__in=[r.trace_id for r in rows])
    by_id = {
        trace.trace_id: trace
        for trace in stored_rows.only("pk", "trace_id", "tenant_id", "agent", "flow", "received_at")
    }
    record_results(
        [(by_id[row.trace_id], results) for row, results in zip(rows, verdicts, strict=True)], enforced, mode="runtime"
    )
    new = [trace.pk for trace in by_id.values()]
    _date_results_by_their_trace(new)
    loaded.traces += len(rows)
    loaded.ledger += _write_ledger(tenant, judge.calls, by_id, enforced)
    _demo_run(tenant, by_id, enforced, now)
    violations = list(Violation.objects.filter(trace_id__in=new).order_by("pk").values_list("pk", flat=True))
    loaded.violations += len(violations)
    loaded.reviews += _review(violations, rng, reviewer)


def _date_results_by_their_trace(trace_pks: list[int]) -> None:
    """Results and violations carry the time their trace was received, not the load's."""
    received = Subquery(RunTrace.objects.filter(pk=OuterRef("trace_id")).values("received_at")[:1])
    for start in range(0, len(trace_pks), 500):
        chunk = trace_pks[start : start + 500]
        EvaluationResult.objects.filter(trace_id__in=chunk).update(created_at=received)
        violation_days.redate(Violation.objects.filter(trace_id__in=chunk), received)


def _write_ledger(tenant: Tenant, calls: list[dict[str, Any]], traces: dict[str, RunTrace], enforced: list[Any]) -> int:
    revisions = {item.guardrail.id: item.revision for item in enforced}
    entries = []
    for call in calls:
        trace = traces[call["trace"]]
        revision = revisions[call["guardrail"]]
        entries.append(
            JudgeLedgerEntry(
                tenant=tenant,
                guardrail_id=revision.guardrail_id,
                revision=revision,
                trace=trace,
                trace_ref=trace.trace_id,
                created_at=trace.received_at + timedelta(milliseconds=call["latency_ms"]),
                **{k: v for k, v in call.items() if k not in ("trace", "guardrail")},
            )
        )
    ledger.record(entries, batch_size=1000)
    return len(entries)


def _demo_run(tenant: Tenant, traces: dict[str, RunTrace], enforced: list[Any], now: datetime) -> None:
    """A finished CI-mode evaluation run over the tenant's latest refund traces."""
    if Evaluation.objects.filter(tenant=tenant, started_by_label="load_demo").exists():
        return
    chosen = sorted((t for t in traces.values() if t.flow.startswith("refund")), key=lambda t: t.received_at)[-80:]
    documents = dict(RunTrace.objects.filter(pk__in=[t.pk for t in chosen]).values_list("pk", "document"))
    run = Evaluation.objects.create(
        tenant=tenant,
        mode="ci",
        trace_filters={"flow": "refund*", "latest": 80},
        started_by_label="load_demo",
        status=Evaluation.Status.SUCCEEDED,
        total=len(chosen),
        done=len(chosen),
        created_at=now - timedelta(hours=3),
        started_at=now - timedelta(hours=3),
        finished_at=now - timedelta(hours=3) + timedelta(seconds=41),
    )
    zero_llm = [item for item in enforced if item.guardrail.kind == "zero-llm"]
    run.guardrails = [item.guardrail.id for item in zero_llm]
    run.save(update_fields=["guardrails"])
    run.revisions.set([item.revision for item in zero_llm])
    guardrails = [item.guardrail for item in zero_llm]
    summary: dict[str, dict[str, int]] = defaultdict(lambda: {"pass": 0, "fail": 0, "error": 0, "skipped": 0})
    verdicts = []
    with evaluation_services(tenant.slug, evaluation=run) as services:
        for trace in chosen:
            document = documents[trace.pk]
            results = evaluate_all(
                guardrails, document, services.context(document, "ci"), engine=deployment.engine()
            ).results
            for result in results:
                summary[result.guardrail][result.status] += 1
            verdicts.append((trace, results))
    record_results(verdicts, enforced, mode="ci", evaluation=run)
    run.summary = dict(summary)
    run.save(update_fields=["summary"])


def _review(violations: list[int], rng: random.Random, reviewer: User) -> int:
    """Give the new violations varied review states, through the review service."""
    caller = Caller(user=reviewer)
    plan: dict[str, list[int]] = defaultdict(list)
    for pk in violations:
        roll = rng.random()
        if roll < 0.30:
            plan["acknowledged"].append(pk)
        elif roll < 0.48:
            plan["resolved"].append(pk)
        elif roll < 0.56:
            plan["false-positive"].append(pk)
    reviewed = 0
    # Resolved and false positives were acknowledged first: their history has two steps.
    first = plan["acknowledged"] + plan["resolved"] + plan["false-positive"]
    steps = [("acknowledged", first), ("resolved", plan["resolved"]), ("false-positive", plan["false-positive"])]
    for state, pks in steps:
        for start in range(0, len(pks), 2000):
            selection = Violation.objects.filter(pk__in=pks[start : start + 2000])
            note = rng.choice(REVIEW_NOTES[state])
            reviewed += len(workflow.review(selection, state, note, caller).reviewed)
    return reviewed
