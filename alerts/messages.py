"""What a delivery says: the webhook's JSON and the text of Slack messages and e-mails."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from alerts.models import Delivery
from alerts.serialize import firing_state


def payload(delivery: Delivery, at: datetime) -> dict[str, Any]:
    """The webhook body: `{"type": "alert.fired|alert.resolved", "timestamp", "data"}`;
    `data.sequence` numbers the rule's messages to this channel (1, 2, ...)."""
    firing, rule = delivery.firing, delivery.firing.rule
    return {
        "type": f"alert.{delivery.event}",
        "timestamp": at.isoformat(),
        "data": {
            "sequence": delivery.sequence,
            "tenant": delivery.tenant.slug,
            "rule": {"id": rule.pk, "name": rule.name, "kind": rule.kind, "params": rule.params},
            "firing": {"id": firing.pk, **firing_state(firing)},
        },
    }


def text_of(delivery: Delivery) -> str:
    """A few lines for people (Slack, e-mail)."""
    firing, rule = delivery.firing, delivery.firing.rule
    head = "Resolved" if delivery.event == Delivery.Event.RESOLVED else "Alert"
    lines = [
        f"{head}: {rule.name} ({delivery.tenant.slug})",
        firing.summary,
        f"Fired at {firing.fired_at:%Y-%m-%d %H:%M} UTC",
    ]
    if firing.resolved_at and delivery.event == Delivery.Event.RESOLVED:
        lines.append(f"Resolved at {firing.resolved_at:%Y-%m-%d %H:%M} UTC")
    return "\n".join(lines)
