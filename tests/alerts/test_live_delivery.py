"""A spike alert, end to end: real sockets, a real Celery worker, signed webhooks.

A violations rule (over 3x yesterday, at least 5) fires once on a spike, resolves the
next day and fires again on the next spike. Each message reaches a live receiver with a
valid Standard Webhooks signature; the receiver answers the first attempt with 500 and
the delivery is tried again, with the same webhook-id, and lands. A second receiver never
answers in time: its attempts end at the send deadline and are logged, and the first
receiver's deliveries are not held up by it.
"""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from alerts.firing import evaluate_rules
from alerts.models import Delivery, DeliveryAttempt, Firing
from alerts.services import save_channel, save_rule
from tests.alerts.receiver import Receiver
from tests.traces.workers import Worker, wait_for
from traces.models import ViolationDay

pytestmark = [pytest.mark.services, pytest.mark.django_db(transaction=True)]

WORKER_SETTINGS: dict[str, Any] = {
    "KINDGI_ALERT_RETRY_BASE_S": 1,
    "KINDGI_ALERT_SEND_TIMEOUT_S": 1,
    "KINDGI_ALERT_MAX_ATTEMPTS": 3,
    "KINDGI_ALERT_PRIVATE_URLS": "true",
}
DAY = date(2026, 11, 30)
NOON = datetime(2026, 11, 30, 12, tzinfo=UTC)


def delivered(channel: Any, event: str, firing: Firing) -> bool:
    return Delivery.objects.filter(channel=channel, event=event, firing=firing, state="delivered").exists()


def test_a_spike_fires_once_resolves_and_fires_again_with_signed_retried_deliveries(
    acme: Any, halt_guardrail: Any, real_broker: Any, tmp_path: Path
) -> None:
    with Receiver(statuses=[500, 200]) as good, Receiver(hang_seconds=4) as slow:
        hook = save_channel(acme, {"name": "ops", "kind": "webhook", "url": good.url}, "fixture")
        stuck = save_channel(acme, {"name": "stuck", "kind": "webhook", "url": slow.url}, "fixture")
        good.secret, slow.secret = hook.secret, stuck.secret
        params = {"guardrail": "no-refunds", "windowDays": 1, "factor": 3, "minCount": 5}
        save_rule(
            acme, {"name": "refund spike", "kind": "violations", "params": params, "channels": [hook, stuck]}, "fixture"
        )
        ViolationDay.objects.create(
            tenant=acme,
            guardrail=halt_guardrail,
            revision=halt_guardrail.revisions.get(),
            severity="critical",
            day=DAY - timedelta(days=1),
            count=2,
        )
        ViolationDay.objects.create(
            tenant=acme,
            guardrail=halt_guardrail,
            revision=halt_guardrail.revisions.get(),
            severity="critical",
            day=DAY,
            count=20,
        )
        worker = Worker("alerts", tmp_path, concurrency=2, **WORKER_SETTINGS)
        try:
            assert evaluate_rules(NOON) == {"fired": 1, "resolved": 0}
            assert evaluate_rules(NOON + timedelta(minutes=1)) == {"fired": 0, "resolved": 0}  # one episode
            first = Firing.objects.get()
            assert first.observed == {
                "count": 20,
                "baseline": 2,
                "windowDays": 1,
                "from": "2026-11-30",
                "to": "2026-11-30",
            }
            wait_for(lambda: delivered(hook, "fired", first), 30, "the first alert delivered", worker)

            assert [r.status for r in good.requests] == [500, 200]
            assert all(r.verified for r in good.requests)
            assert good.requests[0].headers["webhook-id"] == good.requests[1].headers["webhook-id"]
            assert good.requests[1].json["type"] == "alert.fired"
            assert good.requests[1].json["data"]["firing"]["observed"]["count"] == 20
            attempts = DeliveryAttempt.objects.filter(delivery__channel=hook).order_by("number")
            assert [(a.number, a.status_code, a.ok) for a in attempts] == [(1, 500, False), (2, 200, True)]

            assert evaluate_rules(NOON + timedelta(days=1)) == {"fired": 0, "resolved": 1}
            first.refresh_from_db()
            assert first.state == "resolved" and (first.resolved_observed or {})["count"] == 0
            wait_for(lambda: delivered(hook, "resolved", first), 30, "the resolution delivered", worker)
            assert good.requests[-1].json["type"] == "alert.resolved"

            ViolationDay.objects.create(
                tenant=acme,
                guardrail=halt_guardrail,
                revision=halt_guardrail.revisions.get(),
                severity="critical",
                day=DAY + timedelta(days=2),
                count=30,
            )
            assert evaluate_rules(NOON + timedelta(days=2)) == {"fired": 1, "resolved": 0}
            second = Firing.objects.exclude(pk=first.pk).get()
            wait_for(lambda: delivered(hook, "fired", second), 30, "the second alert delivered", worker)
            fired = [
                r.json["data"]["firing"]["id"]
                for r in good.requests
                if r.status == 200 and r.json["type"] == "alert.fired"
            ]
            assert fired == [first.pk, second.pk]
            assert all(r.verified for r in good.requests)

            wait_for(
                lambda: Delivery.objects.filter(channel=stuck, state="failed").count() >= 1,
                40,
                "the unanswered deliveries failed for good",
                worker,
            )
            stuck_attempts = DeliveryAttempt.objects.filter(delivery__channel=stuck)
            assert stuck_attempts.count() >= 3
            assert all(a.status_code is None and "no answer within 1 s" in a.answer for a in stuck_attempts)
            assert all(a.duration_ms < 2500 for a in stuck_attempts)
            assert all(r.verified for r in slow.requests)
        finally:
            worker.stop()


def test_a_delivery_survives_its_worker_being_killed_mid_send(acme: Any, real_broker: Any, tmp_path: Path) -> None:
    from alerts.delivery import resend_due
    from alerts.firing import fire
    from alerts.rules import Observation

    settings = {**WORKER_SETTINGS, "KINDGI_ALERT_SEND_TIMEOUT_S": 2}
    with Receiver(hang_seconds=30, hang_requests=1) as receiver:
        hook = save_channel(acme, {"name": "ops", "kind": "webhook", "url": receiver.url}, "fixture")
        receiver.secret = hook.secret
        rule = save_rule(acme, {"name": "failures", "kind": "run_failed", "params": {}, "channels": [hook]}, "fixture")
        first = Worker("first", tmp_path, concurrency=1, **settings)
        try:
            fire(rule, Observation(True, "run 1 failed", {}), NOON, event_key="evaluation:1")
            wait_for(lambda: len(receiver.requests) == 1, 30, "the first attempt under way", first)
        finally:
            first.kill()  # mid-send: the receiver has not answered
        delivery = Delivery.objects.get()
        assert (delivery.state, delivery.attempts, delivery.lease_until is not None) == ("pending", 1, True)
        assert not DeliveryAttempt.objects.exists()
        second = Worker("second", tmp_path, concurrency=1, **settings)
        try:
            assert resend_due() == 0  # the lost worker's lease is still trusted
            wait_for(lambda: resend_due() == 1, 20, "the lease to run out")
            wait_for(lambda: Delivery.objects.get().state == "delivered", 30, "the delivery sent again", second)
        finally:
            second.stop()
        assert [r.headers["webhook-id"] for r in receiver.requests] == [delivery.msg_id] * 2
        assert all(r.verified for r in receiver.requests)
        assert list(DeliveryAttempt.objects.values_list("number", "status_code")) == [(2, 200)]


def test_a_precision_alert_fires_on_reviews_and_resolves_when_they_are_corrected(
    acme: Any, acme_guardrail: Any, bob: Any, api: Any, real_broker: Any, tmp_path: Path
) -> None:
    """The write path end to end: each review queues the rule's evaluation on the worker,
    which fires (two false positives of three reviewed: 33% under 80%) and, once the
    reviewers correct themselves, resolves; both messages reach the receiver signed."""
    from tests.traces import seed

    with Receiver(statuses=[500, 200, 200]) as receiver:
        hook = save_channel(acme, {"name": "ops", "kind": "webhook", "url": receiver.url}, "fixture")
        receiver.secret = hook.secret
        params = {"guardrail": "no-refunds", "threshold": 0.8, "minReviewed": 3}
        save_rule(
            acme, {"name": "refund precision", "kind": "precision", "params": params, "channels": [hook]}, "fixture"
        )
        seed.traces(acme, 3)
        first, second, third = seed.violations(acme)
        client = api(bob)
        worker = Worker("precision", tmp_path, concurrency=2, **WORKER_SETTINGS)
        try:
            for violation, state in ((first, "false-positive"), (second, "false-positive"), (third, "acknowledged")):
                answer = client.post(f"/api/v1/violations/{violation.pk}/review", {"state": state}, format="json")
                assert answer.status_code == 200, answer.json()
            wait_for(lambda: Firing.objects.filter(state="firing").exists(), 30, "the precision alert fired", worker)
            firing = Firing.objects.get()
            assert (firing.observed["precision"], firing.observed["reviewed"]) == (0.3333, 3)
            wait_for(lambda: delivered(hook, "fired", firing), 30, "the alert delivered", worker)
            assert [r.status for r in receiver.requests] == [500, 200]
            assert receiver.requests[1].json["type"] == "alert.fired"
            assert receiver.requests[1].json["data"]["firing"]["observed"]["falsePositives"] == 2

            for state in ("open", "acknowledged"):
                answer = client.post(
                    "/api/v1/violations/review", {"ids": [first.pk, second.pk], "state": state}, format="json"
                )
                assert answer.status_code == 200, answer.json()
            wait_for(lambda: delivered(hook, "resolved", firing), 30, "the resolution delivered", worker)
            firing.refresh_from_db()
            assert firing.state == "resolved" and (firing.resolved_observed or {})["precision"] == 1.0
            assert receiver.requests[-1].json["type"] == "alert.resolved"
            assert all(r.verified for r in receiver.requests)
            assert Firing.objects.count() == 1
        finally:
            worker.stop()


def test_a_rules_events_reach_the_receiver_in_order_though_first_attempts_fail(
    acme: Any, real_broker: Any, tmp_path: Path
) -> None:
    """Two episodes (four messages) of one rule, sent at once to a worker of two
    processes; the receiver refuses the first attempt of every `fired` message, so each
    is retried a second later. The successful requests arrive 1, 2, 3, 4, each `fired`
    before its `resolved`."""
    from alerts.firing import fire, resolve
    from alerts.rules import Observation

    seen_ids: set[str] = set()

    def first_attempt_of_fired_fails(headers: dict[str, str], body: bytes) -> int:
        first = headers["webhook-id"] not in seen_ids
        seen_ids.add(headers["webhook-id"])
        return 503 if first and b'"alert.fired"' in body else 200

    with Receiver(answer=first_attempt_of_fired_fails) as receiver:
        hook = save_channel(acme, {"name": "ops", "kind": "webhook", "url": receiver.url}, "fixture")
        receiver.secret = hook.secret
        rule = save_rule(
            acme, {"name": "flapping", "kind": "violations", "params": {"threshold": 0}, "channels": [hook]}, "fixture"
        )
        worker = Worker("order", tmp_path, concurrency=2, **WORKER_SETTINGS)
        try:
            for episode in range(2):
                firing = fire(rule, Observation(True, f"breach {episode}", {}), NOON + timedelta(hours=episode))
                resolve(firing, Observation(False, "cleared", {}), NOON + timedelta(hours=episode, minutes=30))
            wait_for(lambda: Delivery.objects.filter(state="delivered").count() == 4, 40, "the four messages", worker)
        finally:
            worker.stop()
        landed = [(r.json["data"]["sequence"], r.json["type"]) for r in receiver.requests if r.status == 200]
        assert landed == [(n, "alert.fired" if n % 2 else "alert.resolved") for n in range(1, 5)]
        assert all(r.verified for r in receiver.requests)
        assert len(receiver.requests) == 6  # each `fired` twice
