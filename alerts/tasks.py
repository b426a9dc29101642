"""Celery tasks of alerts: send a delivery, fire on an event, evaluate precision rules
after a review, the periodic check.

Tasks take primary keys, re-read their rows, are acknowledged late and are harmless when
run twice (a claimed delivery is skipped, an event fires a rule once).
"""

from __future__ import annotations

from typing import Any

from celery import shared_task
from django.conf import settings

from alerts import delivery, firing

# An attempt ends at its deadline (KINDGI_ALERT_SEND_TIMEOUT_S) by itself; the task's limits
# stop one that does not (a stuck write of its answer) before its claim runs out (the lease,
# twice the deadline and 5 s), so that the periodic check sends it again and nothing else.
SEND_SOFT_LIMIT_S = 2 * settings.KINDGI_ALERT_SEND_TIMEOUT_S + 1
SEND_HARD_LIMIT_S = 2 * settings.KINDGI_ALERT_SEND_TIMEOUT_S + 3


@shared_task(acks_late=True, time_limit=SEND_HARD_LIMIT_S, soft_time_limit=SEND_SOFT_LIMIT_S, ignore_result=True)
def deliver(delivery_id: int) -> str:
    """Try one delivery (a no-op unless it is pending, due, unclaimed and the first of its
    rule's messages to its channel that is not done)."""
    return delivery.deliver(delivery_id)


@shared_task(acks_late=True, time_limit=120, soft_time_limit=90, ignore_result=True)
def record_event(kind: str, tenant_id: int, key: str, summary: str, figures: dict[str, Any]) -> int:
    """Fire the tenant's rules of `kind` for a failed run or upload."""
    return firing.record_event(kind, tenant_id, key, summary, figures)


@shared_task(acks_late=True, time_limit=120, soft_time_limit=90, ignore_result=True)
def evaluate_precision(tenant_ids: list[int], violation_ids: list[int]) -> dict[str, int]:
    """Evaluate the precision rules of the guardrails whose violations were just reviewed."""
    return firing.evaluate_precision(tenant_ids, violation_ids)


@shared_task(acks_late=True, time_limit=240, soft_time_limit=200, ignore_result=True)
def tick() -> dict[str, int]:
    """The periodic check: evaluate the condition rules, send what is due again."""
    counts = firing.evaluate_rules()
    counts["resent"] = delivery.resend_due()
    return counts
