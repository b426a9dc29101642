"""Each kind of background work has a queue of its own, served by workers of its own.

With a backlog of runs that no worker has reached and a webhook receiver that takes 5 s an
answer holding the deliveries' worker, a batch's runtime evaluation and an alert tick are
still done at once by the worker of their queues (real worker processes, Redis or the
filesystem broker, a real HTTP receiver).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.utils import timezone

from alerts.firing import record_event
from alerts.models import Firing
from alerts.services import save_channel, save_rule
from kindgi_console.celery import app
from tests.alerts.receiver import Receiver
from tests.conftest import make_trace
from tests.traces.workers import Worker, wait_for
from traces.models import EvaluationResult, PendingRuntimeEvaluation, ViolationDay, WorkerHeartbeat

pytestmark = [pytest.mark.services, pytest.mark.django_db(transaction=True)]

RUNS_BACKLOG = 300
SLOW_DELIVERIES = 4
#: Far above what either takes alone (about a second), far below what waiting behind the
#: slow receiver's deliveries (4 x 5 s) or the runs would take.
PROMPTLY_S = 12.0


def queued(role: str) -> int:
    """Messages waiting in the queue of `role`."""
    with app.connection_for_write() as connection:
        return int(connection.default_channel.queue_declare(queue=settings.KINDGI_QUEUES[role]).message_count)


def test_the_routes_give_each_kind_of_work_its_queue_and_beat_ticks_expire() -> None:
    app.loader.import_default_modules()  # every app's tasks, as a worker loads them
    queues = settings.KINDGI_QUEUES
    route = app.amqp.router.route
    assert route({}, "traces.tasks.evaluate_ingested")["queue"].name == queues["runtime"]
    for task in ("start_evaluation", "evaluate_chunk", "process_upload", "run_preview", "compare_runs"):
        assert route({}, f"traces.tasks.{task}")["queue"].name == queues["runs"]
    assert route({}, "alerts.tasks.deliver")["queue"].name == queues["deliveries"]
    entries: dict[str, dict[str, Any]] = settings.CELERY_BEAT_SCHEDULE
    for entry in entries.values():
        assert route({}, entry["task"])["queue"].name == queues["periodic"]
        # a tick that waited until the next one was sent is dropped, not run late
        assert 0 < entry["options"]["expires"] <= entry["schedule"]
    ours = [name for name in app.tasks if name.startswith(("traces.", "alerts.", "guardrails.", "kindgi_console."))]
    assert ours and all(route({}, name)["queue"].name in queues.values() for name in ours)


def test_runtime_evaluation_and_alert_ticks_are_not_held_by_runs_or_a_slow_receiver(
    acme: Any, acme_key: Any, halt_guardrail: Any, api: Any, real_broker: Any, tmp_path: Path
) -> None:
    from traces.runs.tasks import evaluate_chunk

    with Receiver(hang_seconds=5) as slow:
        hook = save_channel(acme, {"name": "slow", "kind": "webhook", "url": slow.url}, "fixture")
        for number in range(SLOW_DELIVERIES):
            save_rule(acme, {"name": f"failures {number}", "kind": "run_failed", "channels": [hook]}, "fixture")
        mail = save_channel(acme, {"name": "mail", "kind": "email", "emails": ["ops@example.org"]}, "fixture")
        spike = save_rule(
            acme,
            {"name": "any violation", "kind": "violations", "params": {"threshold": 0}, "channels": [mail]},
            "fixture",
        )
        ViolationDay.objects.create(
            tenant=acme,
            guardrail=halt_guardrail,
            revision=halt_guardrail.revisions.get(),
            severity="critical",
            day=timezone.localdate(),
            count=3,
        )
        for chunk in range(RUNS_BACKLOG):
            evaluate_chunk.delay(10**9 + chunk)  # a backlog of runs: no runs worker here
        assert record_event("run_failed", acme.pk, "evaluation:1", "run 1 failed", {}) == SLOW_DELIVERIES

        worker_settings: dict[str, Any] = {"KINDGI_ALERT_SEND_TIMEOUT_S": 8, "KINDGI_ALERT_PRIVATE_URLS": "true"}
        deliveries = Worker("deliveries", tmp_path, concurrency=1, roles=["deliveries"], **worker_settings)
        prompt = Worker("prompt", tmp_path, concurrency=1, roles=["runtime", "periodic"], **worker_settings)
        try:
            wait_for(lambda: len(slow.requests) == 1, 60, "a delivery to the slow receiver in flight", deliveries)
            wait_for(
                lambda: WorkerHeartbeat.objects.filter(hostname__startswith="prompt@").exists(),
                60,
                "the runtime and periodic worker to be ready",
                prompt,
            )

            started = time.monotonic()
            batch = {"traces": [make_trace(f"turn-{n}") for n in range(20)]}
            answer = api(acme_key).post("/api/v1/traces", batch, format="json")
            assert answer.status_code == 207, answer.content
            wait_for(
                lambda: (
                    not PendingRuntimeEvaluation.objects.exists()
                    and EvaluationResult.objects.filter(mode="runtime").count() == 20
                ),
                PROMPTLY_S,
                "the batch's runtime evaluation",
                prompt,
            )
            from alerts.tasks import tick

            tick.delay()
            wait_for(lambda: Firing.objects.filter(rule=spike).exists(), PROMPTLY_S, "the alert tick", prompt)
            assert time.monotonic() - started < PROMPTLY_S

            assert len(slow.requests) < SLOW_DELIVERIES  # the receiver still held the deliveries' worker
            assert queued("runs") == RUNS_BACKLOG  # no worker of these queues took a run's chunk
        finally:
            deliveries.kill()
            prompt.stop()
