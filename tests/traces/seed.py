"""Arranging traces, violations and ledger entries for the page and review tests."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal
from typing import Any

from django.utils import timezone

from guardrails.models import Guardrail
from kindgi_console.tenancy.models import Tenant
from tests.conftest import make_trace
from traces.ingest.documents import content_hash
from traces.ingest.evaluate import evaluate_stored_traces
from traces.judge.ledger import record as record_ledger
from traces.models import JudgeLedgerEntry, RunTrace, Violation


def run_trace(tenant: Tenant, document: dict[str, Any], **fields: Any) -> RunTrace:
    """An unsaved RunTrace of `document`, as ingestion would store it."""
    return RunTrace(
        tenant=tenant,
        trace_id=document["id"],
        agent=document.get("agent", ""),
        flow=document.get("flow", ""),
        document=document,
        content_hash=content_hash(document),
        **fields,
    )


def traces(tenant: Tenant, count: int, *, prefix: str = "run", **fields: Any) -> list[RunTrace]:
    """`count` stored traces of the runtrace.md example (calling issue_refund), evaluated
    with the enabled guardrails: with `halt_guardrail`, each gets one violation."""
    now = timezone.now()
    rows = []
    for n in range(count):
        document = make_trace(f"{prefix}-{tenant.slug}-{n:04}", tenant=tenant.slug, **fields)
        rows.append(run_trace(tenant, document, received_at=now - timedelta(minutes=n)))
    RunTrace.objects.bulk_create(rows)
    stored = list(RunTrace.objects.filter(tenant=tenant, trace_id__startswith=f"{prefix}-"))
    evaluate_stored_traces([trace.pk for trace in stored])
    return stored


def violations(tenant: Tenant) -> list[Violation]:
    return list(Violation.objects.filter(tenant=tenant).order_by("pk"))


def ledger(tenant: Tenant, count: int, **fields: Any) -> None:
    guardrail = Guardrail.objects.first()
    assert guardrail is not None
    values: dict[str, Any] = {
        "model_id": "small-judge",
        "input_tokens": 1000,
        "output_tokens": 20,
        "cost_usd": Decimal("0.00125"),
        "latency_ms": 800,
        "outcome": "PASS",
    }
    values.update(fields)
    record_ledger([JudgeLedgerEntry(tenant=tenant, guardrail=guardrail, **values) for _ in range(count)])
