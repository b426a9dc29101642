"""A real worker runs a 10,000-trace evaluation, is killed with SIGKILL mid-run, and a new
worker finishes it with exactly one result per trace and guardrail.

The broker is the configured one: Redis in CI (CELERY_BROKER_URL), the filesystem
transport of the embedded default otherwise. Redis would deliver the lost worker's
messages again after its visibility timeout; the filesystem transport would not. Both
recover through the chunk leases: the new worker, once started, sends again every chunk
whose lease ran out.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from django.db.models import Count

from guardrails.services import Author, save_guardrail
from kindgi_console.celery import app
from tests.conftest import make_guardrail, make_trace
from tests.traces.seed import run_trace
from tests.traces.workers import Worker, purge_queue, require_broker, wait_for
from traces.models import Evaluation, EvaluationChunk, EvaluationResult, RunTrace
from traces.runs import evaluations

TRACES = 10_000
LEASE_SECONDS = 3
WORKER_SETTINGS: dict[str, Any] = {
    "KINDGI_CHUNK_LEASE_SECONDS": LEASE_SECONDS,
    "CELERY_VISIBILITY_TIMEOUT": 5,
    "KINDGI_EVALUATION_CHUNK_SIZE": 500,
}

pytestmark = [pytest.mark.services, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def real_broker() -> Any:
    """Tasks go to the broker (not run in this process); the queue starts empty."""
    app.conf.task_always_eager = False
    require_broker()
    purge_queue()
    yield
    purge_queue()


def store_many(tenant: Any, count: int) -> None:
    template = make_trace(tenant=tenant.slug)
    rows = []
    for n in range(count):
        document = {**template, "id": f"run-{n:05d}"}
        if n % 4 == 0:
            document["toolCalls"] = template["toolCalls"][:1]
        rows.append(run_trace(tenant, document))
    RunTrace.objects.bulk_create(rows, batch_size=2000)


def three_guardrails() -> None:
    author = Author(user=None, label="fixture")
    save_guardrail(make_guardrail(), author)
    save_guardrail(
        make_guardrail("cite", check="must-cite", config={"min": 1}, action={"on-violation": "log-only"}), author
    )
    save_guardrail(
        make_guardrail("max-calls", check="max-tool-calls", config={"max": 1}, action={"on-violation": "log-only"}),
        author,
    )


def test_a_run_survives_its_worker_being_killed(acme: Any, real_broker: Any, settings: Any, tmp_path: Path) -> None:
    settings.KINDGI_CHUNK_LEASE_SECONDS = LEASE_SECONDS
    three_guardrails()
    store_many(acme, TRACES)
    run = evaluations.create_run(evaluations.RunRequest(tenant=acme, label="worker test"))

    first = Worker("first", tmp_path, concurrency=1, **WORKER_SETTINGS)
    try:
        wait_for(lambda: _done(run) >= 1000, 60, "two chunks to finish", first)
    finally:
        first.kill()
    killed_at = Evaluation.objects.get(pk=run.pk)
    assert killed_at.status == "running", "the run ended before the worker was killed: nothing was tested"
    assert 1000 <= killed_at.done < TRACES

    second = Worker("second", tmp_path, concurrency=2, **WORKER_SETTINGS)
    try:
        wait_for(lambda: Evaluation.objects.get(pk=run.pk).status != "running", 75, "the run to finish", second)
    finally:
        second.stop()

    run.refresh_from_db()
    assert (run.status, run.done, run.total) == ("succeeded", TRACES, TRACES), second.output()
    results = EvaluationResult.objects.filter(evaluation=run)
    assert results.count() == TRACES * 3
    per_pair = results.values("trace_id", "revision_id").annotate(n=Count("id")).filter(n__gt=1)
    assert not per_pair.exists()
    assert results.values("trace_id").distinct().count() == TRACES
    assert set(EvaluationChunk.objects.filter(evaluation=run).values_list("status", flat=True)) == {"done"}
    assert run.summary["no-refunds"] == {"pass": 2500, "fail": 7500, "error": 0, "skipped": 0}


def _done(run: Evaluation) -> int:
    return Evaluation.objects.filter(pk=run.pk).values_list("done", flat=True).get()
