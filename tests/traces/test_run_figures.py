"""A run killed and cancelled on real workers: its summary and progress equal what is stored.

The first worker is killed (SIGKILL) mid-run and a second takes the run over; it is
cancelled while both of the second worker's processes are writing a batch (held, in the
test, by a lock on the violations' roll-up that their batches wait for): those batches
commit as the cancel waits for them, and count in the run's figures.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest
from django.db import connection, connections, transaction

from tests.traces.test_run_faults import done, stored_counts
from tests.traces.test_worker_recovery import real_broker, store_many, three_guardrails  # noqa: F401
from tests.traces.workers import Worker, wait_for
from traces.models import Evaluation, EvaluationResult, ViolationDay
from traces.runs import evaluations, run_ends

pytestmark = [
    pytest.mark.services,
    pytest.mark.postgresql("batches held by a row lock that another process waits for"),
    pytest.mark.django_db(transaction=True),
]

TRACES = 8_000
LEASE_SECONDS = 3
WORKER_SETTINGS: dict[str, Any] = {
    "KINDGI_CHUNK_LEASE_SECONDS": LEASE_SECONDS,
    "KINDGI_EVALUATION_CHUNK_SIZE": 1000,
    "KINDGI_EVALUATION_BATCH": 250,
}


def waiting_on_locks() -> int:
    """Backends of the test database waiting for a lock (the workers' held batches)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_stat_clear_snapshot()")  # read afresh inside a transaction too
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
            "AND wait_event_type = 'Lock' AND pid <> pg_backend_pid()"
        )
        return int(cursor.fetchone()[0])


def test_a_killed_and_cancelled_runs_summary_and_progress_equal_the_database(
    acme: Any, real_broker: Any, settings: Any, tmp_path: Path
) -> None:
    settings.KINDGI_CHUNK_LEASE_SECONDS = LEASE_SECONDS
    three_guardrails()
    store_many(acme, TRACES)
    run = evaluations.create_run(evaluations.RunRequest(tenant=acme, label="killed and cancelled"))
    first = Worker("killed", tmp_path, concurrency=2, **WORKER_SETTINGS)
    try:
        wait_for(lambda: done(run) >= 1000, 90, "a chunk to finish", first)
    finally:
        first.kill()
    second = Worker("cancelled", tmp_path, concurrency=2, **WORKER_SETTINGS)
    cancelled: list[bool] = []
    failures: list[BaseException] = []
    try:
        at_kill = done(run)
        wait_for(lambda: done(run) >= at_kill + 500, 90, "the second worker to take the run over", second)
        with transaction.atomic():
            list(ViolationDay.objects.select_for_update().filter(tenant=acme))  # held: batches wait to commit
            wait_for(lambda: waiting_on_locks() >= 2, 30, "both processes to be writing", second)

            def cancel() -> None:
                try:
                    cancelled.append(run_ends.cancel_run(Evaluation.objects.get(pk=run.pk)))
                except BaseException as error:
                    failures.append(error)
                finally:
                    connections.close_all()

            canceller = threading.Thread(target=cancel)
            canceller.start()
            # The cancel waits for the batches being written (or, had it none to wait for, ends).
            wait_for(
                lambda: waiting_on_locks() >= 3 or not canceller.is_alive(), 30, "the cancel to wait or end", second
            )
        canceller.join(timeout=30)
        wait_for(second.idle, 30, "whatever was in flight to have written", second)
    finally:
        second.stop()
    assert not failures, failures
    assert cancelled == [True], "the run ended before it was cancelled: nothing was tested"

    run.refresh_from_db()
    results = EvaluationResult.objects.filter(evaluation=run)
    evaluated = results.values("trace_id").distinct().count()
    assert run.status == "cancelled" and 0 < evaluated < TRACES
    assert (run.done, run.total) == (evaluated, TRACES)
    assert results.count() == evaluated * 3
    stored = stored_counts(run)
    assert run.summary == {
        guardrail: {"pass": 0, "fail": 0, "error": 0, "skipped": 0, **counts} for guardrail, counts in stored.items()
    }
    assert run_ends.live_summary(run) == run.summary
