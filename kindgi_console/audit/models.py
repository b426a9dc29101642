"""The audit log's one model: an entry per change, never edited, never deleted.

An entry keeps who (`actor`, a username or an API key's `key:<prefix>`), when, the tenant
(none for what belongs to the whole console: guardrails without an owner, judge models),
the object and what changed (`changes`: `{field: [before, after]}`). Its foreign keys hold
no database constraint and delete nothing: a removed user or tenant must not take its
history with it, and the table refuses UPDATE and DELETE on PostgreSQL (migration 0002).
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone

from kindgi_console.tenancy.models import Tenant
from kindgi_console.tenancy.scoping import TenantScopedQuerySet


class AuditEntry(models.Model):
    """One change: `action` is `<object type>.<verb>` (guardrail.create, apikey.revoke …)."""

    created_at = models.DateTimeField(default=timezone.now)
    tenant = models.ForeignKey(
        Tenant, null=True, blank=True, on_delete=models.DO_NOTHING, db_constraint=False, related_name="+"
    )
    actor_user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.DO_NOTHING,
        db_constraint=False,
        related_name="+",
    )
    actor = models.CharField(max_length=200)
    action = models.CharField(max_length=100)
    object_type = models.CharField(max_length=100)
    object_id = models.CharField(max_length=300, blank=True)
    object_repr = models.CharField(max_length=300, blank=True)
    changes = models.JSONField(default=dict, blank=True)

    objects = TenantScopedQuerySet.as_manager()

    class Meta:
        verbose_name_plural = "audit entries"
        indexes = [
            models.Index(fields=["tenant", "-created_at", "-id"], name="audit_tenant_time"),
            models.Index(fields=["-created_at", "-id"], name="audit_time"),
            models.Index(fields=["object_type", "object_id"], name="audit_object"),
        ]

    def __str__(self) -> str:
        return f"{self.created_at:%Y-%m-%d %H:%M} {self.actor} {self.action} {self.object_id}"
