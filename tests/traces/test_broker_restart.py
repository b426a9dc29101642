"""Redis restarted (without persistence) in the middle of a run, with ingested batches
queued: a real worker, as a deployment runs it (gossip, mingle, the periodic check), comes
back on its own, and the run and the outbox finish within seconds of the broker, although
every message Redis held was lost with it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest
from django.conf import settings
from django.db.models import Count
from django.utils import timezone

from kindgi_console import jobs
from kindgi_console.tenancy.models import ApiKey
from tests.conftest import make_trace
from tests.traces.test_worker_recovery import store_many, three_guardrails
from tests.traces.workers import RedisServer, Worker, require_broker, wait_for
from traces.ingest import uploads
from traces.ingest.tasks import evaluate_ingested
from traces.models import Evaluation, EvaluationChunk, EvaluationResult, PendingRuntimeEvaluation, Upload
from traces.runs import chunks, evaluations
from traces.store import leases

pytestmark = [pytest.mark.services, pytest.mark.django_db(transaction=True)]

TRACES = 1500
CHUNK = 50
#: Far from what recovery takes (a few seconds) and far under the queued lease (300 s)
#: that recovery waited for before.
RECOVERY_BOUND_S = 30
#: What a worker takes to start on a busy machine (imports, Django, the pool).
WORKER_START_S = 20
WORKER_SETTINGS: dict[str, Any] = {"KINDGI_EVALUATION_CHUNK_SIZE": CHUNK, "KINDGI_CHUNK_CHECK_SECONDS": 2}


def status(run_id: int) -> tuple[str, int]:
    return Evaluation.objects.filter(pk=run_id).values_list("status", "done").get()


def ingest(web: str, key: str, prefix: str) -> None:
    batch = {"traces": [make_trace(f"{prefix}-{n}") for n in range(10)]}
    answer = httpx.post(f"{web}/api/v1/traces", headers={"Authorization": f"Bearer {key}"}, json=batch, timeout=30)
    assert answer.status_code == 207, answer.text[:500]


def test_a_run_and_the_outbox_finish_within_seconds_of_a_redis_restart(
    web: str, redis_server: RedisServer, acme: Any, tmp_path: Path
) -> None:
    three_guardrails()
    store_many(acme, TRACES)
    key = ApiKey.issue(scopes=["ingest", "read", "evaluate"], tenant=acme, name="restart")[1]
    worker = Worker(
        "restart",
        tmp_path,
        concurrency=1,
        beat=True,
        quiet=False,
        CELERY_BROKER_URL=redis_server.url,
        **WORKER_SETTINGS,
    )
    try:
        started = httpx.post(f"{web}/api/v1/evaluations", headers={"Authorization": f"Bearer {key}"}, json={})
        assert started.status_code == 202, started.text[:500]
        run_id = started.json()["id"]
        wait_for(lambda: status(run_id)[1] >= 3 * CHUNK, 60, "three chunks to finish", worker)
        ingest(web, key, "queued")  # its message waits in Redis behind the run's chunks
        redis_server.stop()
        assert status(run_id)[0] == "running", "the run ended before Redis stopped: nothing was tested"
        ingest(web, key, "down")  # stored, its evaluation waits in the outbox
        wait_for(lambda: "Cannot connect to redis" in worker.log.read_text(), 30, "the worker to miss Redis", worker)
        redis_server.start()
        wait_for(
            lambda: status(run_id)[0] != "running" and not PendingRuntimeEvaluation.objects.exists(),
            RECOVERY_BOUND_S,
            "the run and the outbox to finish after Redis came back",
            worker,
        )
    finally:
        worker.stop()

    run = Evaluation.objects.get(pk=run_id)
    assert (run.status, run.done, run.total) == ("succeeded", TRACES, TRACES), worker.output()
    results = EvaluationResult.objects.filter(evaluation=run)
    assert results.count() == TRACES * 3
    assert not results.values("trace_id", "revision_id").annotate(n=Count("id")).filter(n__gt=1).exists()
    runtime = EvaluationResult.objects.filter(evaluation=None, mode="runtime")
    assert runtime.values("trace_id").distinct().count() == 20
    assert not runtime.values("trace_id", "revision_id").annotate(n=Count("id")).filter(n__gt=1).exists()


def test_a_worker_started_again_after_redis_lost_its_messages_sends_the_work_again(
    web: str, redis_server: RedisServer, acme: Any, tmp_path: Path
) -> None:
    """The worker died, Redis restarted meanwhile, and the process manager starts a new worker."""
    three_guardrails()
    store_many(acme, TRACES // 2)
    key = ApiKey.issue(scopes=["ingest", "read", "evaluate"], tenant=acme, name="restart")[1]
    settings = {**WORKER_SETTINGS, "CELERY_BROKER_URL": redis_server.url, "KINDGI_CHUNK_LEASE_SECONDS": 3}
    first = Worker("first", tmp_path, concurrency=1, **settings)
    try:
        started = httpx.post(f"{web}/api/v1/evaluations", headers={"Authorization": f"Bearer {key}"}, json={})
        run_id = started.json()["id"]
        wait_for(lambda: status(run_id)[1] >= 3 * CHUNK, 60, "three chunks to finish", first)
        ingest(web, key, "queued")
    finally:
        first.kill()
    redis_server.stop()
    redis_server.start()
    assert status(run_id)[0] == "running", "the run ended before the worker died: nothing was tested"
    second = Worker("second", tmp_path, concurrency=1, **settings)
    try:
        wait_for(
            lambda: status(run_id)[0] != "running" and not PendingRuntimeEvaluation.objects.exists(),
            RECOVERY_BOUND_S + WORKER_START_S,
            "the run and the outbox to finish",
            second,
        )
    finally:
        second.stop()
    run = Evaluation.objects.get(pk=run_id)
    assert (run.status, run.done) == ("succeeded", TRACES // 2), second.output()
    assert EvaluationResult.objects.filter(evaluation=run).count() == TRACES // 2 * 3


def test_queued_work_sent_before_the_broker_was_lost_is_sent_again_at_once_and_once(
    acme: Any, alice: Any, halt_guardrail: Any, monkeypatch: Any
) -> None:
    sent: list[tuple[str, int]] = []
    monkeypatch.setattr(chunks, "send_chunk", lambda pk: sent.append(("chunk", pk)))
    monkeypatch.setattr(uploads, "_send", lambda pk: sent.append(("upload", pk)))
    monkeypatch.setattr(
        evaluate_ingested, "apply_async", lambda args, kwargs, **_: sent.append(("batch", kwargs["pending_id"]))
    )
    on_its_way = timezone.now() + leases.lease()  # just sent: minutes before its lease runs out
    run = evaluations.create_run(evaluations.RunRequest(tenant=acme))
    Evaluation.objects.filter(pk=run.pk).update(status="running")
    queued = EvaluationChunk.objects.create(
        evaluation=run, number=0, first_pk=0, last_pk=10, size=1, status="queued", lease_until=on_its_way
    )
    EvaluationChunk.objects.create(  # held by a live worker: left alone
        evaluation=run, number=1, first_pk=11, last_pk=20, size=1, status="running", lease_until=on_its_way
    )
    upload = Upload.objects.create(
        tenant=acme, uploaded_by=alice, original_name="a.jsonl", file="x", lease_until=on_its_way
    )
    pending = PendingRuntimeEvaluation.objects.create(trace_ids=[1], lease_until=on_its_way)
    assert sum(jobs.recover_all().values()) == 0

    lost_before = timezone.now()
    assert jobs.recover_all(lost_before) == {
        "alert deliveries": 0,
        "evaluation runs": 1,
        "runtime evaluations": 1,
        "uploads": 1,
    }
    assert sorted(sent) == sorted([("chunk", queued.pk), ("upload", upload.pk), ("batch", pending.pk)])
    assert sum(jobs.recover_all(lost_before).values()) == 0
    pending.refresh_from_db()
    assert pending.attempts == 0  # a lost broker is not the batch's failure


@pytest.mark.redis("a key the Redis broker keeps beside its queues")
def test_the_broker_tells_once_that_it_lost_what_it_held() -> None:
    from kindgi_console.celery import app

    require_broker()
    with app.connection_for_write() as conn:  # what a Redis restarted without persistence has lost
        conn.default_channel.client.delete(leases.BROKER_SENTINEL.format(queue=settings.CELERY_TASK_DEFAULT_QUEUE))
    assert leases.broker_lost_its_messages() is True
    assert leases.broker_lost_its_messages() is False


@pytest.mark.redis("kombu's hash of unacknowledged messages is the Redis transport's")
def test_a_queue_starts_empty_of_what_a_killed_worker_left_unacknowledged() -> None:
    """A message an earlier test's killed worker took comes back into its queue once the
    visibility timeout has passed, in whatever test then runs a worker: `purge_queue` drops
    this process's (and leaves another process's queues alone)."""
    import json
    import time as clock

    from kindgi_console.celery import app
    from tests.traces.workers import drop_unacked, purge_queue

    ours, theirs = settings.KINDGI_QUEUES["runs"], "another-process-runs"
    with app.connection_for_write() as connection:
        channel = connection.default_channel
        client = channel.client
        for tag, queue in (("left-by-a-killed-worker", ours), ("held-by-another-process", theirs)):
            client.hset(channel.unacked_key, tag, json.dumps([{"body": "", "headers": {}}, queue, queue]))
            client.zadd(channel.unacked_index_key, {tag: clock.time() - 3600})
        try:
            purge_queue()
            held = {key.decode() for key in client.hkeys(channel.unacked_key)}
            assert "left-by-a-killed-worker" not in held and "held-by-another-process" in held
            assert client.zscore(channel.unacked_index_key, "left-by-a-killed-worker") is None
            assert drop_unacked() == 0
        finally:
            client.hdel(channel.unacked_key, "held-by-another-process")
            client.zrem(channel.unacked_index_key, "held-by-another-process")
