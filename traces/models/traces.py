"""Run traces as runtimes send them, the uploads that store them, spans waiting for their turn, and retention."""

from __future__ import annotations

import secrets

from django.conf import settings
from django.db import models
from django.utils import timezone

from kindgi_console.jobs import LeasedJob, Progress
from kindgi_console.tenancy.models import Tenant
from kindgi_console.tenancy.scoping import TenantScopedQuerySet

MODES = [("runtime", "runtime"), ("ci", "ci")]


class RunTrace(models.Model):
    """One agent turn as a runtime sent it.

    `trace_id` is the runtime's id, unique per tenant: the idempotency key of ingestion.
    `content_hash` is the sha256 of the canonical JSON (sorted keys) of the document as
    received, so that a retry is recognised as a duplicate and another turn under the
    same id as a conflict. `withheld`: a halt guardrail failed at the runtime verdict and
    the stored document has no `output`.
    """

    tenant = models.ForeignKey(Tenant, on_delete=models.PROTECT, related_name="traces")
    trace_id = models.CharField(max_length=200)
    agent = models.CharField(max_length=200, blank=True)
    flow = models.CharField(max_length=200, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    ended_at = models.DateTimeField(null=True, blank=True)
    document = models.JSONField()
    content_hash = models.CharField(max_length=64)
    withheld = models.BooleanField(default=False)
    received_at = models.DateTimeField(default=timezone.now)
    upload = models.ForeignKey(
        "Upload",
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="traces",
        help_text="the upload that stored this trace, if one did",
    )

    objects = TenantScopedQuerySet.as_manager()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["tenant", "trace_id"], name="trace_id_per_tenant")]
        indexes = [
            models.Index(fields=["tenant", "-received_at", "-id"], name="trace_tenant_received"),
            models.Index(fields=["tenant", "agent", "-received_at"], name="trace_tenant_agent"),
        ]

    def __str__(self) -> str:
        return f"{self.tenant_id}/{self.trace_id}"


def upload_path(upload: Upload, filename: str) -> str:
    """Where an upload's file is stored: a name of its own (a random prefix), so that no
    other upload writes it and a copy cut short can be removed (`traces.ingest.uploads`)."""
    return f"uploads/{upload.tenant_id}/{timezone.now():%Y/%m/%d}/{secrets.token_hex(6)}-{filename}"


class Upload(Progress, LeasedJob):
    """A file of traces (.json, .jsonl, either gzip-compressed) uploaded from a page.

    The file is streamed to MEDIA_ROOT and processed in the background, line by line (or
    element by element for a JSON array): bounded memory whatever its size. Counts say
    what became of the traces; `errors` keeps the first bad lines (line number and reason,
    at most KINDGI_UPLOAD_MAX_ERRORS of them, `errors_total` counts all). With
    `evaluate_after`, an evaluation of the stored traces starts when processing ends.
    Its `attempts` count the tasks taken since the last stored batch.
    """

    tenant = models.ForeignKey(Tenant, on_delete=models.PROTECT, related_name="uploads")
    uploaded_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    file = models.FileField(upload_to=upload_path, max_length=500)
    original_name = models.CharField(max_length=300)
    size = models.PositiveBigIntegerField(default=0)
    bytes_read = models.PositiveBigIntegerField(default=0)
    lines_total = models.PositiveIntegerField(default=0)
    lines_stored = models.PositiveIntegerField(default=0)
    lines_duplicate = models.PositiveIntegerField(default=0)
    lines_conflict = models.PositiveIntegerField(default=0)
    lines_invalid = models.PositiveIntegerField(default=0)
    errors = models.JSONField(default=list, help_text='[{"line": n, "path": "...", "message": "..."}]')
    errors_total = models.PositiveIntegerField(default=0)
    failure = models.TextField(blank=True, help_text="why the file as a whole could not be read")
    resume_offset = models.PositiveBigIntegerField(
        default=0, help_text="decompressed bytes read up to the last stored batch (JSON Lines)"
    )
    resume_at = models.PositiveIntegerField(
        default=0, help_text="lines (JSON Lines) or elements (JSON array) read up to the last stored batch"
    )
    claim = models.PositiveIntegerField(default=0, help_text="raised by every task that takes the upload")
    evaluate_after = models.BooleanField(default=False)
    evaluation = models.ForeignKey("Evaluation", on_delete=models.SET_NULL, null=True, blank=True, related_name="+")
    created_at = models.DateTimeField(default=timezone.now)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    objects = TenantScopedQuerySet.as_manager()

    class Meta:
        indexes = [
            models.Index(fields=["tenant", "-created_at", "-id"], name="upload_tenant"),
            # /metrics counts the queued, running and lately failed uploads at each scrape
            models.Index(fields=["status", "created_at"], name="upload_status_time"),
        ]

    def __str__(self) -> str:
        return f"upload {self.pk} {self.original_name} ({self.status})"

    @property
    def done(self) -> int:
        """Progress in bytes of the (possibly compressed) file read so far."""
        return self.size if self.is_final else min(self.bytes_read, self.size)

    @property
    def total(self) -> int:
        return self.size


class PendingSpan(models.Model):
    """A span received over OTLP whose agent turn has not ended yet (docs/otlp.md).

    Kept in the database, not in a process, so that any server can finish the turn and
    memory stays bounded; at most KINDGI_OTLP_MAX_PENDING_SPANS per tenant. `span` is the
    span as the mapping reads it (ids in hex, attributes as JSON values). The turn is
    finished when its agent (or root) span arrives, or by the periodic task once nothing
    new has arrived for KINDGI_OTLP_TURN_TIMEOUT_S.
    """

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="+")
    otel_trace_id = models.CharField(max_length=32)
    span_id = models.CharField(max_length=16)
    span = models.JSONField()
    received_at = models.DateTimeField(default=timezone.now)

    objects = TenantScopedQuerySet.as_manager()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["tenant", "otel_trace_id", "span_id"], name="pending_span_once")]
        indexes = [models.Index(fields=["received_at"], name="pending_span_received")]

    def __str__(self) -> str:
        return f"{self.tenant_id}/{self.otel_trace_id}/{self.span_id}"


class RetentionPolicy(models.Model):
    """How long a tenant's history is kept: traces (with their results, violations and
    reviews), results and judge ledger entries older than `days` are deleted, in batches,
    by the periodic retention task (`traces.store.retention`). A tenant without one keeps all.
    """

    tenant = models.OneToOneField(Tenant, on_delete=models.CASCADE, related_name="retention")
    days = models.PositiveIntegerField(help_text="keep this many days of traces, results and ledger entries")
    updated_at = models.DateTimeField(default=timezone.now)

    objects = TenantScopedQuerySet.as_manager()

    class Meta:
        verbose_name_plural = "retention policies"
        constraints = [models.CheckConstraint(condition=models.Q(days__gte=1), name="retention_at_least_a_day")]

    def __str__(self) -> str:
        return f"{self.tenant_id}: {self.days} days"
