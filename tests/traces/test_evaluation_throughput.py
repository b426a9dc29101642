"""How a run's chunk reads and writes (a few queries whatever its size), and runs whose
work fails for good (they end `failed`, with the reason on the API and the page)."""

from __future__ import annotations

import gc
import html
import threading
from typing import Any

import pytest
from django.db import DataError, connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from guardrails.redaction import judge_key_names
from tests.conftest import make_trace
from tests.traces.test_evaluations import store_traces
from tests.traces.workers import wait_for
from traces.judge.services import ConsoleJudgeServices
from traces.models import Evaluation, EvaluationChunk, EvaluationResult, RunTrace, Violation, ViolationDay
from traces.runs import chunks, evaluations, tasks
from traces.store import bulk, leases

URL = "/api/v1/evaluations"


def queries_of_one_chunk(tenant: Any, count: int, settings: Any) -> int:
    """The queries of evaluating a run of `count` traces planned as one chunk."""
    EvaluationResult.objects.all().delete()
    store_traces(tenant, count)
    settings.KINDGI_EVALUATION_CHUNK_SIZE = count
    run = evaluations.create_run(evaluations.RunRequest(tenant=tenant, label="queries"))
    Evaluation.objects.filter(pk=run.pk).update(status="running")
    [chunk] = list(chunks.plan_chunks(run))
    chunk.save()
    judge_key_names()  # read at most every 10 s: not within one of the chunks measured only
    with CaptureQueriesContext(connection) as captured:
        chunks.evaluate_chunk(chunk.pk)
    assert EvaluationChunk.objects.get(pk=chunk.pk).status == "succeeded"
    return len(captured.captured_queries)


def test_the_queries_of_a_chunk_do_not_grow_with_its_size(acme: Any, guardrails: Any, settings: Any) -> None:
    settings.KINDGI_EVALUATION_BATCH = 500
    small = queries_of_one_chunk(acme, 40, settings)  # above bulk_postgres.FEW_ROWS results: the COPY path
    RunTrace.objects.all().delete()
    large = queries_of_one_chunk(acme, 300, settings)
    assert small == large, (small, large)
    run = Evaluation.objects.latest("pk")
    results = EvaluationResult.objects.filter(evaluation=run)
    assert results.exclude(status="skipped").count() == 600  # two guardrails select every trace
    # A run stores its skipped results too, with why: billing-only's flows select none.
    assert set(results.filter(status="skipped").values_list("skip_reason", flat=True)) == {"flows"}
    assert results.filter(status="skipped").count() == 300
    assert Violation.objects.filter(evaluation=run).count() == 100  # every third trace refunds
    assert sum(ViolationDay.objects.values_list("count", flat=True)) == Violation.objects.count()


def test_no_tenant_is_read_per_trace_when_no_judge_is_in_the_run(
    acme: Any, guardrails: Any, settings: Any, monkeypatch: Any
) -> None:
    known: list[Any] = []
    monkeypatch.setattr(ConsoleJudgeServices, "know_traces", lambda self, rows: known.append(rows))
    queries_of_one_chunk(acme, 20, settings)
    assert known == []


def test_a_chunk_and_an_ingested_batch_pause_the_cycle_collector_and_restore_it(
    acme: Any, guardrails: Any, settings: Any, monkeypatch: Any
) -> None:
    from traces.ingest.evaluate import evaluate_stored_traces

    seen: list[bool] = []
    evaluate_rows = bulk.evaluate_rows

    def watched(*args: Any, **kwargs: Any) -> Any:
        seen.append(gc.isenabled())
        return evaluate_rows(*args, **kwargs)

    monkeypatch.setattr(bulk, "evaluate_rows", watched)
    assert gc.isenabled()
    queries_of_one_chunk(acme, 5, settings)
    assert evaluate_stored_traces(list(RunTrace.objects.values_list("pk", flat=True))) == 5
    assert seen == [False, False] and gc.isenabled()
    gc.disable()  # a caller that paused it itself gets it back paused
    try:
        with bulk.without_cycle_collection():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_a_judge_learns_the_stored_traces_without_reading_their_tenants(acme: Any, db: Any) -> None:
    rows = store_traces(acme, 3)
    services = ConsoleJudgeServices(tenant=acme)
    with CaptureQueriesContext(connection) as captured:
        services.know_traces(rows)
    assert captured.captured_queries == []
    assert services._trace_pks[(acme.pk, rows[0].trace_id)] == rows[0].pk


# ---------------------------------------------------------------------------- failing for good


def test_a_run_that_cannot_start_fails_with_the_reason(api: Any, alice: Any, acme: Any, guardrails: Any) -> None:
    store_traces(acme, 3)
    run = evaluations.create_run(evaluations.RunRequest(tenant=acme, label="test"))
    # A selection the database cannot hold (validated at the door since; older runs exist).
    Evaluation.objects.filter(pk=run.pk).update(trace_filters={"since": "9999-12-31T23:59:59-23:59"})
    # PostgreSQL refuses the offset; on SQLite the time cannot be put in UTC for the query.
    refused, reason = {
        "postgresql": (DataError, 'DataError: time zone displacement out of range: "9999-12-31 23:59:59-23:59"'),
        "sqlite": (OverflowError, "OverflowError: date value out of range"),
    }[connection.vendor]
    with pytest.raises(refused):  # tasks run eagerly here, and propagate
        tasks.start_evaluation.delay(run.pk)
    run.refresh_from_db()
    assert run.status == "failed" and run.finished_at is not None
    assert run.error == f"the run could not start: {reason}"
    answer = api(alice).get(f"{URL}/{run.pk}").json()
    assert (answer["status"], answer["error"]) == ("failed", run.error)
    assert chunks.requeue_expired_work() == 0  # not sent again and again
    page = api(alice).get(f"/evaluations/{run.pk}/")
    assert html.escape(run.error) in page.content.decode()


def test_a_chunk_whose_worker_is_lost_every_time_fails_its_run(
    api: Any, alice: Any, acme: Any, guardrails: Any, settings: Any
) -> None:
    settings.KINDGI_EVALUATION_CHUNK_SIZE = 2
    store_traces(acme, 4)
    run = evaluations.create_run(evaluations.RunRequest(tenant=acme, label="test"))
    Evaluation.objects.filter(pk=run.pk).update(status="running", total=4)
    for chunk in chunks.plan_chunks(run):
        chunk.save()
    lost = EvaluationChunk.objects.filter(evaluation=run).order_by("number").first()
    assert lost is not None
    EvaluationChunk.objects.filter(pk=lost.pk).update(
        status="running", attempts=settings.KINDGI_CHUNK_MAX_ATTEMPTS, lease_until=timezone.now()
    )
    assert chunks.evaluate_chunk(lost.pk) is False
    run.refresh_from_db()
    assert run.status == "failed"
    assert run.error == (
        f"chunk 0 was tried {settings.KINDGI_CHUNK_MAX_ATTEMPTS} times and never "
        "finished (its worker was lost each time)"
    )
    assert api(alice).get(f"{URL}/{run.pk}").json()["error"] == run.error
    assert set(EvaluationChunk.objects.filter(evaluation=run).values_list("status", flat=True)) == {"cancelled"}


def test_post_evaluate_stores_a_trace_with_its_results_in_a_handful_of_queries(
    api: Any, acme_key: str, guardrails: Any
) -> None:
    client = api(acme_key)
    client.post("/api/v1/evaluate", data=make_trace("warm-up"), format="json")
    with CaptureQueriesContext(connection) as captured:
        answer = client.post("/api/v1/evaluate", data=make_trace("turn-2"), format="json")
    assert answer.status_code == 200 and answer.json()["turn"] == "failed"
    # Not the throttle's cache: on the embedded default (no Redis) it is a database table.
    statements = [
        q["sql"]
        for q in captured.captured_queries
        if not q["sql"].startswith(("SAVEPOINT", "RELEASE")) and "kindgi_cache" not in q["sql"]
    ]
    # PostgreSQL: the key with the guardrails' stamp (one statement), then the trace with its
    # results, violations and their daily roll-up in one statement. SQLite: the key, the
    # guardrails, the trace (one INSERT), the results and their violations (two), the
    # roll-up, in one transaction.
    if connection.vendor == "postgresql":
        assert len(statements) == 2, statements
    else:
        assert len(statements) <= 7, statements
    assert Violation.objects.filter(trace__trace_id="turn-2").count() == 1


def test_a_first_attempt_that_meets_results_stored_by_a_takeover_skips_them(
    acme: Any, guardrails: Any, settings: Any
) -> None:
    """The first worker of a chunk COPYs its results straight in; when a worker that took
    the chunk over (its lease ran out) stored some first, the batch skips what is stored."""
    settings.KINDGI_EVALUATION_CHUNK_SIZE = 60
    store_traces(acme, 60)
    run = evaluations.create_run(evaluations.RunRequest(tenant=acme, label="takeover"))
    Evaluation.objects.filter(pk=run.pk).update(status="running")
    [chunk] = list(chunks.plan_chunks(run))
    chunk.save()
    targets = chunks.run_targets(run)
    batch = next(bulk.stored_traces(evaluations.run_traces(run), 60))
    assert chunks.evaluate_batch(run, targets, batch[:20])  # the takeover stored a third
    assert chunks.evaluate_batch(run, targets, batch, fresh=True)
    assert EvaluationResult.objects.filter(evaluation=run).count() == 180  # 60 of them skipped
    assert Violation.objects.filter(evaluation=run).count() == 20
    assert sum(ViolationDay.objects.values_list("count", flat=True)) == 20


def test_an_ingested_batch_is_evaluated_in_the_same_queries_at_any_size_and_once(acme: Any, guardrails: Any) -> None:
    from traces.ingest.evaluate import evaluate_stored_traces

    def queries(count: int) -> int:
        RunTrace.objects.all().delete()
        rows = store_traces(acme, count)
        with CaptureQueriesContext(connection) as captured:
            assert evaluate_stored_traces([row.pk for row in rows]) == count
        return len(captured.captured_queries)

    assert queries(40) == queries(300)
    runtime = EvaluationResult.objects.filter(evaluation=None)
    assert runtime.count() == 300 * 2
    assert evaluate_stored_traces(list(RunTrace.objects.values_list("pk", flat=True))) == 300  # delivered again
    assert runtime.count() == 300 * 2
    assert Violation.objects.count() == 100
    assert sum(ViolationDay.objects.values_list("count", flat=True)) == 100


def test_post_evaluate_compiles_each_guardrail_once_per_process(
    api: Any, acme_key: str, guardrails: Any, monkeypatch: Any
) -> None:
    from guardrails import services as guardrails_services
    from guardrails.engine.strategies import ZeroLlmStrategy
    from traces.ingest import evaluate as services

    compiled: list[str] = []
    original = ZeroLlmStrategy._compile

    def counting(guardrail: Any, check: Any) -> Any:
        compiled.append(guardrail.id)
        return original(guardrail, check)

    monkeypatch.setattr(ZeroLlmStrategy, "_compile", staticmethod(counting))
    # A process that has evaluated nothing yet (SQLite gives an earlier test's rows the same keys).
    monkeypatch.setattr(guardrails_services, "_ENGINE_GUARDRAILS", {})
    monkeypatch.setattr(services, "_enforced", None)
    client = api(acme_key)
    for n in range(3):
        assert client.post("/api/v1/evaluate", data=make_trace(f"turn-{n}"), format="json").status_code == 200
    assert sorted(compiled) == ["cite", "no-refunds"]  # billing-only's scope selects none of them


@pytest.mark.django_db(transaction=True)
def test_a_heartbeat_keeps_the_lease_of_a_slow_chunk_and_stops_with_it(
    acme: Any, guardrails: Any, settings: Any
) -> None:
    settings.KINDGI_CHUNK_LEASE_SECONDS = 3  # renewed every second
    run = Evaluation.objects.create(tenant=acme, status="running", total=2)
    chunk = EvaluationChunk.objects.create(
        evaluation=run,
        number=0,
        first_pk=1,
        last_pk=2,
        size=2,
        status="running",
        lease_until=timezone.now() + leases.chunk_lease(),
    )
    claimed = chunk.lease_until
    assert claimed is not None

    def lease() -> Any:
        return EvaluationChunk.objects.get(pk=chunk.pk).lease_until

    with leases.LeaseKeeper(chunk.pk):  # a chunk slower than its lease (judge calls)
        wait_for(lambda: lease() > claimed, 10, "the heartbeat to renew the lease")
    renewed = lease()
    # The heartbeat stopped with the chunk: its thread is gone and the lease stays.
    assert f"lease-{chunk.pk}" not in {thread.name for thread in threading.enumerate()}
    assert renewed is not None and renewed > claimed
    assert lease() == renewed
