"""Runs under faults, on real workers: a cancelled run stops writing, and a killed worker
holds up its run for seconds (its chunk's short lease, renewed by a heartbeat), not minutes.

The workers run with the default leases: nothing here is scaled down.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from django.db.models import Count, Max

from tests.traces.test_worker_recovery import real_broker, store_many, three_guardrails  # noqa: F401
from tests.traces.workers import Worker, wait_for
from traces.models import Evaluation, EvaluationResult, Violation
from traces.runs import evaluations, run_ends

pytestmark = [pytest.mark.services, pytest.mark.django_db(transaction=True)]

TRACES = 10_000


def done(run: Evaluation) -> int:
    return Evaluation.objects.filter(pk=run.pk).values_list("done", flat=True).get()


def stored_counts(run: Evaluation) -> dict[str, dict[str, int]]:
    counts: dict[str, dict[str, int]] = {}
    rows = (
        EvaluationResult.objects.filter(evaluation=run)
        .values_list("guardrail__guardrail_id", "status")
        .annotate(n=Count("id"))
        .order_by()
    )
    for guardrail, status, n in rows:
        counts.setdefault(guardrail, {})[status] = n
    return counts


def test_a_cancelled_run_writes_nothing_after_it_ended(acme: Any, real_broker: Any, tmp_path: Path) -> None:
    three_guardrails()
    store_many(acme, TRACES)
    run = evaluations.create_run(evaluations.RunRequest(tenant=acme, label="cancel test"))
    worker = Worker("cancel", tmp_path, concurrency=2, KINDGI_EVALUATION_BATCH=100)
    try:
        wait_for(lambda: done(run) >= 1000, 60, "two chunks to finish", worker)
        assert run_ends.cancel_run(run), "the run ended before it was cancelled: nothing was tested"
        wait_for(worker.idle, 30, "whatever was in flight to have written", worker)
    finally:
        worker.stop()
    run.refresh_from_db()
    assert run.status == "cancelled" and run.done < TRACES
    last = EvaluationResult.objects.filter(evaluation=run).aggregate(last=Max("created_at"))["last"]
    assert last is not None and last <= run.finished_at, (last, run.finished_at)
    assert not Violation.objects.filter(evaluation=run, created_at__gt=run.finished_at).exists()
    stored = stored_counts(run)
    for guardrail, row in run.summary.items():
        assert {status: n for status, n in row.items() if status != "skipped" and n} == stored.get(guardrail, {})


def test_a_killed_worker_holds_up_its_run_for_seconds(acme: Any, real_broker: Any, tmp_path: Path) -> None:
    three_guardrails()
    store_many(acme, TRACES)
    run = evaluations.create_run(evaluations.RunRequest(tenant=acme, label="kill test"))
    survivor = Worker("survivor", tmp_path, concurrency=1)
    victim = Worker("victim", tmp_path, concurrency=1)
    try:
        wait_for(lambda: done(run) >= 1000, 60, "two chunks to finish", survivor)
        victim.kill()
        killed_at = time.monotonic()
        assert Evaluation.objects.get(pk=run.pk).status == "running", "nothing was tested"
        # The lease (15 s) runs out, the survivor's last chunk schedules a check for then.
        wait_for(lambda: Evaluation.objects.get(pk=run.pk).status != "running", 90, "the run to finish", survivor)
        took = time.monotonic() - killed_at
    finally:
        survivor.stop()
        victim.kill()
    run.refresh_from_db()
    assert (run.status, run.done) == ("succeeded", TRACES), survivor.output()
    assert EvaluationResult.objects.filter(evaluation=run).count() == TRACES * 3
    assert took < 90  # the default lease of 300 s held such a run up for 5 minutes
