"""Rules, channels, firings and deliveries as the API and the pages show them."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from alerts.models import AlertRule, Channel, Delivery, Firing


def rule_json(rule: AlertRule) -> dict[str, Any]:
    return {
        "id": rule.pk,
        "tenant": rule.tenant.slug,
        "name": rule.name,
        "kind": rule.kind,
        "params": rule.params,
        "channels": sorted(c.pk for c in rule.channels.all()),
        "enabled": rule.enabled,
        "createdBy": rule.created_by,
        "createdAt": rule.created_at.isoformat(),
        "updatedAt": rule.updated_at.isoformat(),
    }


def redacted_url(url: str) -> str:
    """Only the origin of a URL: a Slack webhook's path is its credential."""
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}/…" if url else ""


def channel_json(channel: Channel, *, with_secret: bool = False, full_url: bool = True) -> dict[str, Any]:
    """A channel; its signing secret only when asked (on creation, to its authors), its URL
    whole only for those who may change it (`full_url`)."""
    data: dict[str, Any] = {
        "id": channel.pk,
        "tenant": channel.tenant.slug,
        "name": channel.name,
        "kind": channel.kind,
        "url": channel.url if full_url else redacted_url(channel.url),
        "emails": channel.emails,
        "enabled": channel.enabled,
        "createdAt": channel.created_at.isoformat(),
    }
    if with_secret and channel.kind == Channel.Kind.WEBHOOK:
        data["secret"] = channel.secret
    return data


def delivery_json(delivery: Delivery) -> dict[str, Any]:
    return {
        "id": delivery.pk,
        "webhookId": delivery.msg_id,
        "channel": delivery.channel_id,
        "event": delivery.event,
        "sequence": delivery.sequence,
        "state": delivery.state,
        "attempts": delivery.attempts,
        "nextAttemptAt": delivery.next_attempt_at.isoformat() if delivery.state == "pending" else None,
        "deliveredAt": delivery.delivered_at.isoformat() if delivery.delivered_at else None,
        "lastError": delivery.last_error,
        "log": [
            {
                "number": a.number,
                "startedAt": a.started_at.isoformat(),
                "durationMs": a.duration_ms,
                "status": a.status_code,
                "ok": a.ok,
                "answer": a.answer,
            }
            for a in delivery.attempt_log.all()
        ],
    }


def firing_state(firing: Firing) -> dict[str, Any]:
    """A firing's state, summary, observed values and times, as the API and the webhook body give them."""
    return {
        "state": firing.state,
        "summary": firing.summary,
        "observed": firing.observed,
        "resolvedObserved": firing.resolved_observed,
        "firedAt": firing.fired_at.isoformat(),
        "resolvedAt": firing.resolved_at.isoformat() if firing.resolved_at else None,
    }


def firing_json(firing: Firing, *, deliveries: bool = False) -> dict[str, Any]:
    data: dict[str, Any] = {
        "id": firing.pk,
        "tenant": firing.tenant.slug,
        "rule": firing.rule_id,
        **firing_state(firing),
    }
    if deliveries:
        data["deliveries"] = [delivery_json(d) for d in firing.deliveries.all()]
    return data
