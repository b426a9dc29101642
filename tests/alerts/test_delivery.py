"""Deliveries in this process against a live receiver: idempotent, surviving a lost worker,
Slack-compatible and e-mail channels, and the write paths' events."""

from __future__ import annotations

import gzip
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest
from django.core import mail
from django.utils import timezone

from alerts.delivery import claim, deliver, resend_due
from alerts.firing import evaluate_rules, fire, record_event
from alerts.models import Delivery, DeliveryAttempt, Firing
from alerts.rules import Observation
from alerts.services import save_channel, save_rule
from tests.alerts.receiver import Receiver
from tests.conftest import make_trace
from tests.traces.test_uploads import jsonl, upload_file
from traces.models import Evaluation, LedgerDay, ViolationDay
from traces.runs.run_ends import fail_run

pytestmark = pytest.mark.django_db


def rule_with(tenant: Any, channel: Any, kind: str = "violations", params: Any = None) -> Any:
    params = {"threshold": 0} if params is None else params
    return save_rule(tenant, {"name": f"{kind} rule", "kind": kind, "params": params, "channels": [channel]}, "fixture")


def webhook(tenant: Any, receiver: Receiver, kind: str = "webhook") -> Any:
    channel = save_channel(tenant, {"name": kind, "kind": kind, "url": receiver.url}, "fixture")
    receiver.secret = channel.secret
    return channel


def test_a_delivery_claimed_by_a_killed_worker_is_sent_again_once_its_lease_runs_out(
    acme: Any, django_capture_on_commit_callbacks: Any
) -> None:
    with Receiver() as receiver:
        rule = rule_with(acme, webhook(acme, receiver))
        with django_capture_on_commit_callbacks(execute=False):
            fire(rule, Observation(True, "seen", {}), timezone.now())
        delivery = Delivery.objects.get()
        assert claim(delivery.pk) is not None  # a worker took it, then was killed mid-send
        assert resend_due() == 0  # its lease is still trusted
        Delivery.objects.filter(pk=delivery.pk).update(lease_until=timezone.now() - timedelta(seconds=1))
        assert resend_due() == 1
        delivery.refresh_from_db()
        assert (delivery.state, delivery.attempts) == ("delivered", 2)
        assert list(DeliveryAttempt.objects.values_list("number", "status_code")) == [(2, 200)]
        assert deliver(delivery.pk) == "skipped"
        assert resend_due() == 0
        assert len(receiver.requests) == 1 and receiver.requests[0].verified


def test_a_failed_attempt_waits_its_backoff_then_fails_for_good(
    acme: Any, settings: Any, django_capture_on_commit_callbacks: Any
) -> None:
    settings.KINDGI_ALERT_MAX_ATTEMPTS = 2
    with Receiver(statuses=[503]) as receiver:
        rule = rule_with(acme, webhook(acme, receiver))
        with django_capture_on_commit_callbacks(execute=True):
            fire(rule, Observation(True, "seen", {}), timezone.now())
        delivery = Delivery.objects.get()
        assert (delivery.state, delivery.attempts) == ("pending", 1)
        assert delivery.next_attempt_at > timezone.now() + timedelta(seconds=20)
        assert "HTTP 503" in delivery.last_error
        Delivery.objects.filter(pk=delivery.pk).update(next_attempt_at=timezone.now())
        resend_due()
        delivery.refresh_from_db()
        assert (delivery.state, delivery.attempts, len(receiver.requests)) == ("failed", 2, 2)


def test_an_event_fires_each_rule_once_however_often_it_is_told(
    acme: Any, django_capture_on_commit_callbacks: Any
) -> None:
    with Receiver() as receiver:
        rule_with(acme, webhook(acme, receiver), "run_failed", {})
        with django_capture_on_commit_callbacks(execute=True):
            assert record_event("run_failed", acme.pk, "evaluation:7", "run 7 failed", {"evaluation": 7}) == 1
            assert record_event("run_failed", acme.pk, "evaluation:7", "run 7 failed", {"evaluation": 7}) == 0
        assert Firing.objects.count() == 1 and len(receiver.requests) == 1


def test_a_failed_run_fires_the_tenants_run_failed_rules_only(
    acme: Any, globex: Any, django_capture_on_commit_callbacks: Any
) -> None:
    with Receiver() as ours, Receiver() as theirs:
        rule_with(acme, webhook(acme, ours), "run_failed", {})
        rule_with(globex, webhook(globex, theirs), "run_failed", {})
        run = Evaluation.objects.create(tenant=acme, status="running")
        with django_capture_on_commit_callbacks(execute=True):
            fail_run(run.pk, "the worker ran out of memory")
        firing = Firing.objects.get()
        assert firing.rule.tenant == acme and firing.state == "resolved"
        assert firing.observed == {"evaluation": run.pk, "error": "the worker ran out of memory"}
        assert [r.json["data"]["firing"]["summary"] for r in ours.requests] == [
            f"evaluation run {run.pk} failed: the worker ran out of memory"
        ]
        assert theirs.requests == []


def test_a_failed_upload_fires_upload_failed_rules(
    acme: Any, alice: Any, django_capture_on_commit_callbacks: Any
) -> None:
    with Receiver() as receiver:
        rule_with(acme, webhook(acme, receiver, "slack"), "upload_failed", {})
        data = gzip.compress(jsonl(make_trace("a")) * 50)[:-30] + b"garbage-garbage-garbage-garbag"
        with django_capture_on_commit_callbacks(execute=True):
            upload = upload_file(acme, alice, data, "t.jsonl.gz")
        assert upload.status == "failed"
        (request,) = receiver.requests
        assert "webhook-signature" not in request.headers  # Slack-compatible: plain {"text"}
        assert request.json["text"].startswith("Alert: upload_failed rule (acme)\nupload ")


def test_email_goes_through_the_django_backend(acme: Any, django_capture_on_commit_callbacks: Any) -> None:
    channel = save_channel(acme, {"name": "mail", "kind": "email", "emails": ["ops@example.org"]}, "fixture")
    rule = rule_with(acme, channel)
    with django_capture_on_commit_callbacks(execute=True):
        fire(rule, Observation(True, "12 violations in 1 day(s) (over 0)", {}), timezone.now())
    (message,) = mail.outbox
    assert message.to == ["ops@example.org"] and "violations rule" in message.subject
    assert Delivery.objects.get().state == "delivered"


def test_spend_over_the_monthly_amount_fires_and_resolves_with_the_new_month(acme: Any, halt_guardrail: Any) -> None:
    rule_with(
        acme,
        save_channel(acme, {"name": "m", "kind": "email", "emails": ["a@example.org"]}, "f"),
        "spend",
        {"period": "month", "amountUsd": 5},
    )
    for day, cost in ((date(2026, 11, 2), "3.5"), (date(2026, 11, 20), "2.25")):
        LedgerDay.objects.create(tenant=acme, guardrail=halt_guardrail, model_id="m", day=day, cost_usd=Decimal(cost))
    assert evaluate_rules(datetime(2026, 11, 10, tzinfo=UTC)) == {"fired": 0, "resolved": 0}
    assert evaluate_rules(datetime(2026, 11, 30, tzinfo=UTC)) == {"fired": 1, "resolved": 0}
    assert Firing.objects.get().observed["costUsd"] == "5.75"
    assert evaluate_rules(datetime(2026, 12, 1, tzinfo=UTC)) == {"fired": 0, "resolved": 1}


def test_calls_over_their_guardrails_own_budget_fire_a_spend_rule(acme: Any, halt_guardrail: Any) -> None:
    channel = save_channel(acme, {"name": "m", "kind": "email", "emails": ["a@example.org"]}, "f")
    save_rule(
        acme, {"name": "over budget", "kind": "spend", "channels": [channel], "params": {"overBudgetCalls": 2}}, "f"
    )
    LedgerDay.objects.create(
        tenant=acme, guardrail=halt_guardrail, model_id="m", day=date(2026, 11, 30), over_budget=3, calls=10
    )
    assert evaluate_rules(datetime(2026, 11, 30, 9, tzinfo=UTC)) == {"fired": 1, "resolved": 0}
    assert Firing.objects.get().summary == "judge spend $0.0000 this day (3 calls over their guardrail's budget)"


def test_disabling_a_firing_rule_resolves_its_firing(
    acme: Any, halt_guardrail: Any, django_capture_on_commit_callbacks: Any
) -> None:
    channel = save_channel(acme, {"name": "m", "kind": "email", "emails": ["a@example.org"]}, "f")
    fields = {"name": "any", "kind": "violations", "channels": [channel], "params": {"threshold": 0}}
    rule = save_rule(acme, dict(fields), "f")
    ViolationDay.objects.create(
        tenant=acme,
        guardrail=halt_guardrail,
        revision=halt_guardrail.revisions.get(),
        severity="critical",
        day=date(2026, 11, 30),
        count=1,
    )
    with django_capture_on_commit_callbacks(execute=True):
        assert evaluate_rules(datetime(2026, 11, 30, 9, tzinfo=UTC))["fired"] == 1
        save_rule(acme, {**fields, "enabled": False}, "f", rule)
        assert evaluate_rules(datetime(2026, 11, 30, 10, tzinfo=UTC)) == {"fired": 0, "resolved": 1}
    assert Firing.objects.get().resolved_observed == {"ruleDisabled": True}
    assert [m.subject.split(":")[0] for m in mail.outbox] == ["[Kindgi] Alert", "[Kindgi] Resolved"]


def test_violation_rules_filter_by_severity_and_action_and_read_only_their_window(
    acme: Any, halt_guardrail: Any
) -> None:
    channel = save_channel(acme, {"name": "m", "kind": "email", "emails": ["a@example.org"]}, "f")
    save_rule(
        acme,
        {
            "name": "halts",
            "kind": "violations",
            "channels": [channel],
            "params": {"action": "halt", "threshold": 9, "windowDays": 2},
        },
        "f",
    )
    save_rule(
        acme,
        {"name": "infos", "kind": "violations", "channels": [channel], "params": {"severity": "info", "threshold": 0}},
        "f",
    )
    for day, count in ((date(2026, 11, 27), 100), (date(2026, 11, 29), 4), (date(2026, 11, 30), 6)):
        ViolationDay.objects.create(
            tenant=acme,
            guardrail=halt_guardrail,
            revision=halt_guardrail.revisions.get(),
            severity="critical",
            day=day,
            count=count,
        )
    assert evaluate_rules(datetime(2026, 11, 30, tzinfo=UTC)) == {"fired": 1, "resolved": 0}
    assert Firing.objects.get().observed["count"] == 10


def test_a_webhook_to_a_private_address_is_refused_unless_allowed(
    acme: Any, settings: Any, django_capture_on_commit_callbacks: Any
) -> None:
    settings.KINDGI_ALERT_PRIVATE_URLS = False
    with Receiver() as receiver:
        rule = rule_with(acme, webhook(acme, receiver))
        with django_capture_on_commit_callbacks(execute=True):
            fire(rule, Observation(True, "seen", {}), timezone.now())
        assert receiver.requests == []
        attempt = DeliveryAttempt.objects.get()
        assert attempt.status_code is None and attempt.answer == "refused: 127.0.0.1 is 127.0.0.1, not a public address"


def test_the_periodic_task_evaluates_and_sends_what_is_due(acme: Any, halt_guardrail: Any) -> None:
    from alerts.tasks import tick

    channel = save_channel(acme, {"name": "m", "kind": "email", "emails": ["a@example.org"]}, "f")
    save_rule(acme, {"name": "any", "kind": "violations", "channels": [channel], "params": {"threshold": 0}}, "f")
    ViolationDay.objects.create(
        tenant=acme,
        guardrail=halt_guardrail,
        revision=halt_guardrail.revisions.get(),
        severity="critical",
        day=timezone.localdate(),
        count=1,
    )
    assert tick.delay().get() == {"fired": 1, "resolved": 0, "resent": 1}  # on_commit does not run here
    assert Delivery.objects.get().state == "delivered" and len(mail.outbox) == 1


def test_a_delivery_whose_rule_is_deleted_mid_send_is_dropped_quietly(
    acme: Any, monkeypatch: Any, django_capture_on_commit_callbacks: Any
) -> None:
    from alerts import delivery as delivery_module
    from alerts.services import delete_rule

    with Receiver() as receiver:
        rule = rule_with(acme, webhook(acme, receiver))
        with django_capture_on_commit_callbacks(execute=False):
            fire(rule, Observation(True, "seen", {}), timezone.now())
        sent = delivery_module.send

        def send_then_delete(delivery: Any, at: Any) -> Any:
            answer = sent(delivery, at)
            delete_rule(rule, "f")
            return answer

        monkeypatch.setattr(delivery_module, "send", send_then_delete)
        assert deliver(Delivery.objects.get().pk) == "gone"
        assert not Delivery.objects.exists() and not DeliveryAttempt.objects.exists()
        assert len(receiver.requests) == 1


def test_a_rules_messages_reach_a_channel_in_order_whatever_fails_first(
    acme: Any, django_capture_on_commit_callbacks: Any
) -> None:
    """The `fired` message's first attempt fails: its `resolved` waits for it, and goes as
    soon as the `fired` one lands; `data.sequence` numbers them."""
    from alerts.firing import resolve

    seen_ids: set[str] = set()

    def first_attempt_fails(headers: dict[str, str], body: bytes) -> int:
        first = headers["webhook-id"] not in seen_ids
        seen_ids.add(headers["webhook-id"])
        return 500 if first and b'"alert.fired"' in body else 200

    with Receiver(answer=first_attempt_fails) as receiver:
        rule = rule_with(acme, webhook(acme, receiver))
        with django_capture_on_commit_callbacks(execute=False):
            firing = fire(rule, Observation(True, "seen", {}), timezone.now())
            resolve(firing, Observation(False, "cleared", {}), timezone.now())
        fired, resolved = Delivery.objects.order_by("pk")
        assert (fired.sequence, resolved.sequence) == (1, 2)
        assert deliver(fired.pk) == "pending"  # 500: due again after the backoff
        assert deliver(resolved.pk) == "skipped"  # waits for the `fired` one
        assert resend_due() == 0  # nothing due: the head waits for its backoff
        Delivery.objects.filter(pk=fired.pk).update(next_attempt_at=timezone.now())
        with django_capture_on_commit_callbacks(execute=True):
            assert resend_due() == 1  # the head only
        assert list(Delivery.objects.order_by("pk").values_list("state", flat=True)) == ["delivered", "delivered"]
        assert [(r.json["type"], r.json["data"]["sequence"], r.status) for r in receiver.requests] == [
            ("alert.fired", 1, 500),
            ("alert.fired", 1, 200),
            ("alert.resolved", 2, 200),
        ]
        # The next episode goes on numbering the rule's messages to the channel.
        with django_capture_on_commit_callbacks(execute=True):
            fire(rule, Observation(True, "seen again", {}), timezone.now())
        assert receiver.requests[-1].json["data"]["sequence"] == 3
