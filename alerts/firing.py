"""Firing and resolving: one firing per episode, its deliveries queued after commit.

`evaluate_rules` runs from the periodic check (alerts.tasks.tick); `evaluate_precision`
from the task a review queues; `record_event` from the task that the write paths of
failed runs and uploads queue. Each only writes rows and queues deliveries once its
transaction commits, so a slow receiver delays none of them.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import Max
from django.utils import timezone

from alerts.models import AlertRule, Delivery, Firing
from alerts.rules import CONDITION_KINDS, Observation, observe
from kindgi_console import tasking
from traces.models import Violation


def evaluate_rules(now: datetime | None = None) -> dict[str, int]:
    """Evaluate every enabled condition rule; how many fired and resolved."""
    now = now or timezone.now()
    counts = evaluate(AlertRule.objects.filter(enabled=True, kind__in=CONDITION_KINDS), now)
    counts["resolved"] += resolve_disabled(now)
    return counts


def evaluate_precision(tenant_ids: list[int], violation_ids: list[int], now: datetime | None = None) -> dict[str, int]:
    """Evaluate the tenants' enabled precision rules on the guardrails of the reviewed
    violations (the write path's evaluation; the periodic one covers every rule)."""
    rules = AlertRule.objects.filter(tenant_id__in=tenant_ids, kind=AlertRule.Kind.PRECISION, enabled=True)
    if not rules.exists():
        return {"fired": 0, "resolved": 0}
    guardrails = set(
        Violation.objects.filter(pk__in=violation_ids, tenant_id__in=tenant_ids).values_list(
            "guardrail__guardrail_id", flat=True
        )
    )
    wanted = [rule for rule in rules if rule.params.get("guardrail") in guardrails]
    return evaluate(wanted, now or timezone.now(), tenant_ids)


def evaluate(rules: Iterable[AlertRule], now: datetime, tenant_ids: list[int] | None = None) -> dict[str, int]:
    """Fire the rules whose condition holds and that have no open firing; resolve the open
    ones whose condition cleared; how many of each. `tenant_ids`: the rules' tenants, when
    they are not every tenant."""
    counts = {"fired": 0, "resolved": 0}
    firings = Firing.objects.filter(state=Firing.State.FIRING)
    if tenant_ids is not None:
        firings = firings.filter(tenant_id__in=tenant_ids)
    open_rules = set(firings.values_list("rule_id", flat=True))
    for rule in sorted(rules, key=lambda rule: rule.pk):
        seen = observe(rule, timezone.localdate(now), now)
        if seen.breached == (rule.pk in open_rules):
            continue  # nothing changed: no lock, no write
        outcome = change_state(rule, seen, now)
        if outcome:
            counts[outcome] += 1
    return counts


def resolve_disabled(now: datetime) -> int:
    """Resolve the open firings of rules that were disabled: nobody watches them any more."""
    resolved = 0
    for firing in Firing.objects.filter(state=Firing.State.FIRING, rule__enabled=False).select_related("rule"):
        with transaction.atomic():
            if Firing.objects.select_for_update().filter(pk=firing.pk, state=Firing.State.FIRING).exists():
                resolve(firing, Observation(False, "the rule was disabled", {"ruleDisabled": True}), now)
                resolved += 1
    return resolved


def change_state(rule: AlertRule, seen: Observation, now: datetime) -> str | None:
    """Fire a rule whose condition holds, resolve one whose condition cleared (checked again
    under the firing's lock: another evaluator may have been first)."""
    try:
        with transaction.atomic():
            open_firing = Firing.objects.select_for_update().filter(rule=rule, state=Firing.State.FIRING).first()
            if seen.breached and open_firing is None:
                fire(rule, seen, now)
                return "fired"
            if not seen.breached and open_firing is not None:
                resolve(open_firing, seen, now)
                return "resolved"
    except IntegrityError:
        return None  # another evaluator fired it at the same moment: one firing it is
    return None


def fire(rule: AlertRule, seen: Observation, now: datetime, *, event_key: str = "") -> Firing:
    """A new firing with what it saw, and a delivery to each of the rule's channels."""
    firing = Firing.objects.create(
        tenant_id=rule.tenant_id,
        rule=rule,
        event_key=event_key,
        summary=seen.summary[:500],
        observed=seen.figures,
        fired_at=now,
        state=Firing.State.RESOLVED if event_key else Firing.State.FIRING,
        resolved_at=now if event_key else None,
    )
    queue_deliveries(firing, Delivery.Event.FIRED)
    return firing


def resolve(firing: Firing, seen: Observation, now: datetime) -> None:
    firing.state = Firing.State.RESOLVED
    firing.resolved_at = now
    firing.resolved_observed = seen.figures
    firing.save(update_fields=["state", "resolved_at", "resolved_observed"])
    queue_deliveries(firing, Delivery.Event.RESOLVED)


def queue_deliveries(firing: Firing, event: str) -> None:
    """A delivery row per enabled channel, sent by a task once this transaction commits.

    Each is numbered after the rule's last message to the channel, under a lock of the rule's
    row: the numbers of one rule and channel follow the order in which their transactions
    commit, which is the order they are sent in (alerts.delivery.claim).
    """
    with transaction.atomic():
        AlertRule.objects.select_for_update().filter(pk=firing.rule_id).exists()
        ids = []
        for channel in firing.rule.channels.filter(enabled=True):
            last = Delivery.objects.filter(firing__rule_id=firing.rule_id, channel=channel).aggregate(
                last=Max("sequence")
            )["last"]
            delivery = Delivery.objects.create(
                tenant_id=firing.tenant_id, firing=firing, channel=channel, event=event, sequence=(last or 0) + 1
            )
            ids.append(delivery.pk)
        if ids:
            transaction.on_commit(lambda: _send_later(ids), robust=True)


def _send_later(ids: list[int]) -> None:
    for pk in ids:
        tasking.send("alerts.tasks.deliver", pk)


def record_event(kind: str, tenant_id: int, key: str, summary: str, figures: dict[str, Any]) -> int:
    """Fire each enabled rule of `kind` in the tenant for the event `key`, once; how many fired."""
    fired = 0
    seen = Observation(True, summary, figures)
    for rule in AlertRule.objects.filter(tenant_id=tenant_id, kind=kind, enabled=True).order_by("pk"):
        try:
            with transaction.atomic():
                fire(rule, seen, timezone.now(), event_key=key)
                fired += 1
        except IntegrityError:
            continue  # this event already fired this rule (a task delivered twice)
    return fired
