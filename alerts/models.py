"""Alert rules, channels, firings and deliveries: all of one tenant, all state in rows.

A rule's `params` are checked by `alerts.rules.validate_params` for its `kind`. A firing is
one episode of a rule's condition (kept with what it saw when it fired and when it
resolved); a delivery is one message of a firing (fired or resolved) to one channel, with
every attempt in `DeliveryAttempt`. Unique constraints make evaluating and delivering twice
harmless: one open firing per rule, one firing per event, one delivery per firing, event
and channel.
"""

from __future__ import annotations

import json

from django.db import models
from django.db.models import Q
from django.utils import timezone

from kindgi_console.jobs import Leased
from kindgi_console.tenancy.models import Tenant
from kindgi_console.tenancy.scoping import TenantScopedQuerySet


class Channel(models.Model):
    """Where a tenant's alerts go: a signed webhook, a Slack-compatible webhook or e-mail."""

    class Kind(models.TextChoices):
        WEBHOOK = "webhook"
        SLACK = "slack"
        EMAIL = "email"

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="+")
    name = models.CharField(max_length=200)
    kind = models.CharField(max_length=20, choices=Kind.choices)
    url = models.URLField(max_length=2000, blank=True)
    emails = models.JSONField(default=list, blank=True)
    # The Standard Webhooks signing secret (`whsec_` + base64): kept to sign, shown on creation.
    secret = models.CharField(max_length=200, blank=True)
    enabled = models.BooleanField(default=True)
    created_at = models.DateTimeField(default=timezone.now)

    objects = TenantScopedQuerySet.as_manager()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["tenant", "name"], name="alert_channel_name")]

    def __str__(self) -> str:
        return f"{self.name} ({self.kind})"


class AlertRule(models.Model):
    """A condition on a tenant's violations, spend, failures, a guardrail's precision from
    reviews or a review queue's open violations, and the channels told of it."""

    class Kind(models.TextChoices):
        VIOLATIONS = "violations"
        SPEND = "spend"
        RUN_FAILED = "run_failed"
        UPLOAD_FAILED = "upload_failed"
        PRECISION = "precision"
        QUEUE_SIZE = "queue_size", "Queue size"
        QUEUE_AGE = "queue_age", "Queue age"

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="+")
    name = models.CharField(max_length=200)
    kind = models.CharField(max_length=20, choices=Kind.choices)
    params = models.JSONField(default=dict, blank=True)
    channels = models.ManyToManyField(Channel, blank=True, related_name="rules")
    enabled = models.BooleanField(default=True)
    created_by = models.CharField(max_length=200, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(default=timezone.now)

    objects = TenantScopedQuerySet.as_manager()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["tenant", "name"], name="alert_rule_name")]
        indexes = [models.Index(fields=["kind", "enabled"], name="alert_rule_kind")]

    def __str__(self) -> str:
        return self.name

    @property
    def params_text(self) -> str:
        """The parameters as JSON, for the pages."""
        return json.dumps(self.params, sort_keys=True)


class Firing(models.Model):
    """One episode of a rule: fired with what it saw, resolved when the condition cleared.

    An event rule's firing (a failed run or upload) is resolved when it is made: the event
    is over. `event_key` names the event, so that the same failure fires once.
    """

    class State(models.TextChoices):
        FIRING = "firing"
        RESOLVED = "resolved"

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="+")
    rule = models.ForeignKey(AlertRule, on_delete=models.CASCADE, related_name="firings")
    state = models.CharField(max_length=20, choices=State.choices, default=State.FIRING)
    event_key = models.CharField(max_length=200, blank=True)
    summary = models.CharField(max_length=500)
    observed = models.JSONField(default=dict)
    resolved_observed = models.JSONField(null=True, blank=True)
    fired_at = models.DateTimeField(default=timezone.now)
    resolved_at = models.DateTimeField(null=True, blank=True)

    objects = TenantScopedQuerySet.as_manager()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["rule"], condition=Q(state="firing"), name="alert_one_open_firing"),
            models.UniqueConstraint(
                fields=["rule", "event_key"], condition=~Q(event_key=""), name="alert_firing_per_event"
            ),
        ]
        indexes = [models.Index(fields=["tenant", "-fired_at", "-id"], name="alert_firing_tenant_time")]

    def __str__(self) -> str:
        return f"{self.rule_id} {self.state} at {self.fired_at:%Y-%m-%d %H:%M}"


class Delivery(Leased):
    """One message (a firing's `fired` or `resolved`) to one channel, tried until it lands.

    `lease_until` is the claim of the worker sending it; a claim that ran out (a worker
    killed mid-send) lets the periodic check send it again. The Standard Webhooks message
    id is `msg_id`, the same on every attempt, so that a receiver can drop duplicates.
    `sequence` numbers the messages of one rule to one channel (1, 2, ...): they are sent in
    that order, each once the ones before it were delivered or failed for good.
    """

    class Event(models.TextChoices):
        FIRED = "fired"
        RESOLVED = "resolved"

    class State(models.TextChoices):
        PENDING = "pending"
        DELIVERED = "delivered"
        FAILED = "failed"

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="+")
    firing = models.ForeignKey(Firing, on_delete=models.CASCADE, related_name="deliveries")
    channel = models.ForeignKey(Channel, on_delete=models.CASCADE, related_name="deliveries")
    event = models.CharField(max_length=20, choices=Event.choices)
    sequence = models.PositiveIntegerField(default=0)
    state = models.CharField(max_length=20, choices=State.choices, default=State.PENDING)
    next_attempt_at = models.DateTimeField(default=timezone.now)
    last_error = models.CharField(max_length=1000, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    delivered_at = models.DateTimeField(null=True, blank=True)

    objects = TenantScopedQuerySet.as_manager()

    class Meta:
        verbose_name_plural = "deliveries"
        constraints = [models.UniqueConstraint(fields=["firing", "channel", "event"], name="alert_delivery_once")]
        indexes = [
            models.Index(fields=["state", "next_attempt_at"], name="alert_delivery_due"),
            models.Index(fields=["channel", "state", "sequence"], name="alert_delivery_order"),
        ]

    def __str__(self) -> str:
        return f"{self.msg_id} {self.state}"

    @property
    def msg_id(self) -> str:
        return f"msg_kgi_{self.pk}"


class DeliveryAttempt(models.Model):
    """One try of a delivery and the receiver's answer (status, or why there was none)."""

    delivery = models.ForeignKey(Delivery, on_delete=models.CASCADE, related_name="attempt_log")
    number = models.PositiveIntegerField()
    started_at = models.DateTimeField(default=timezone.now)
    duration_ms = models.PositiveIntegerField(default=0)
    status_code = models.PositiveIntegerField(null=True, blank=True)
    ok = models.BooleanField(default=False)
    answer = models.CharField(max_length=500, blank=True)

    class Meta:
        ordering = ["delivery", "number"]
        constraints = [models.UniqueConstraint(fields=["delivery", "number"], name="alert_attempt_number")]

    def __str__(self) -> str:
        return f"{self.delivery_id}#{self.number} {self.status_code or self.answer[:40]}"
