"""The broker down at ingestion: the traces are stored and answered as usual, and their
runtime evaluation happens once it is back (the outbox), over a real server, a Redis of
its own and a real worker."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from django.db.models import Count

from tests.conftest import make_trace
from tests.traces.workers import RedisServer, Worker, wait_for
from traces.ingest import outbox
from traces.models import EvaluationResult, PendingRuntimeEvaluation, RunTrace

pytestmark = [pytest.mark.services, pytest.mark.django_db(transaction=True)]


def test_traces_stored_while_the_broker_is_down_are_evaluated_once_it_is_back(
    web: str, redis_server: RedisServer, acme_key: str, halt_guardrail: Any, tmp_path: Path
) -> None:
    redis_server.stop()
    headers = {"Authorization": f"Bearer {acme_key}"}
    started = time.monotonic()
    batch = httpx.post(
        f"{web}/api/v1/traces", headers=headers, timeout=30, json={"traces": [make_trace(f"b{n}") for n in range(20)]}
    )
    single = httpx.post(f"{web}/api/v1/traces", headers=headers, timeout=30, json=make_trace("single"))
    assert (batch.status_code, single.status_code) == (207, 201), batch.text[:500]
    assert {item["status"] for item in batch.json()["results"]} == {"created"}
    assert time.monotonic() - started < 10
    assert RunTrace.objects.count() == 21 and not EvaluationResult.objects.exists()
    assert PendingRuntimeEvaluation.objects.count() == 2

    redis_server.start()
    worker = Worker("back", tmp_path, concurrency=1, CELERY_BROKER_URL=redis_server.url)
    try:  # the worker's start-up check sends what waits in the outbox
        wait_for(lambda: not PendingRuntimeEvaluation.objects.exists(), 60, "the outbox to drain", worker)
    finally:
        worker.stop()
    results = EvaluationResult.objects.filter(evaluation=None, mode="runtime")
    assert results.count() == 21
    assert not results.values("trace_id").annotate(n=Count("id")).filter(n__gt=1).exists()
    assert RunTrace.objects.filter(withheld=True).count() == 21  # the halt guardrail failed each turn


def test_the_periodic_check_sends_what_waits_in_the_outbox_once(acme: Any, monkeypatch: Any) -> None:
    from traces.ingest.tasks import evaluate_ingested

    sent: list[Any] = []
    monkeypatch.setattr(evaluate_ingested, "apply_async", lambda *args, **kwargs: sent.append(args))
    pending = PendingRuntimeEvaluation.objects.create(trace_ids=[1, 2], lease_until=time_ago(1))
    assert outbox.send_pending() == 1
    assert outbox.send_pending() == 0  # the message on its way has the lease
    assert sent == [(([1, 2],), {"pending_id": pending.pk})]


def test_a_batch_whose_evaluation_keeps_failing_is_sent_a_bounded_number_of_times(
    acme: Any, monkeypatch: Any, settings: Any
) -> None:
    from traces.ingest.tasks import evaluate_ingested

    sent: list[Any] = []
    monkeypatch.setattr(evaluate_ingested, "apply_async", lambda *args, **kwargs: sent.append(args))
    PendingRuntimeEvaluation.objects.create(trace_ids=[1], lease_until=time_ago(1))
    for _ in range(settings.KINDGI_CHUNK_MAX_ATTEMPTS + 2):
        outbox.send_pending()
        PendingRuntimeEvaluation.objects.update(lease_until=time_ago(1))  # its task failed again
    assert len(sent) == settings.KINDGI_CHUNK_MAX_ATTEMPTS
    assert PendingRuntimeEvaluation.objects.get().resent == settings.KINDGI_CHUNK_MAX_ATTEMPTS


def time_ago(seconds: float) -> Any:
    from datetime import timedelta

    from django.utils import timezone

    return timezone.now() - timedelta(seconds=seconds)
