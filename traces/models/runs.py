"""Evaluation runs, their chunks and results, runtime evaluations waiting for a worker, and guardrail previews."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import models
from django.db.models import F, Value
from django.db.models.functions import Coalesce
from django.utils import timezone

from guardrails.models import Guardrail, GuardrailRevision
from kindgi_console.jobs import Job, Leased, LeasedJob, Progress
from kindgi_console.tenancy.models import Tenant
from kindgi_console.tenancy.scoping import TenantScopedQuerySet
from traces.models.traces import MODES, RunTrace


class Evaluation(Progress, Job):
    """A batch evaluation run: which guardrails over which traces, and how far it got.

    Started by an author, run in the background; the pages read its status and progress
    from this row, never from a task backend. `guardrails` are the ids asked for (empty:
    every enabled one); `revisions` pins the revision of each, taken when the run is
    created, so that an edit during the run does not mix two versions. `trace_filters`
    selects the tenant's traces: `agent`, `flow`, `since`, `until` (received, ISO 8601)
    and `upload` (the traces an upload stored). The work is split in `chunks`.
    """

    tenant = models.ForeignKey(Tenant, on_delete=models.PROTECT, related_name="evaluations")
    guardrails = models.JSONField(default=list, help_text="guardrail ids; empty: every enabled one")
    trace_filters = models.JSONField(default=dict)
    mode = models.CharField(max_length=10, choices=MODES, default="ci")
    started_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True)
    started_by_label = models.CharField(max_length=200, blank=True)
    total = models.PositiveIntegerField(default=0)
    done = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(default=timezone.now)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    summary = models.JSONField(default=dict)
    error = models.TextField(blank=True)
    revisions = models.ManyToManyField(GuardrailRevision, related_name="+", blank=True)

    objects = TenantScopedQuerySet.as_manager()

    class Meta:
        indexes = [
            models.Index(fields=["tenant", "-created_at", "-id"], name="evaluation_tenant"),
            # /metrics counts the queued, running and lately failed runs at each scrape
            models.Index(fields=["status", "created_at"], name="evaluation_status_time"),
        ]

    def __str__(self) -> str:
        return f"evaluation {self.pk} ({self.status})"


class EvaluationChunk(LeasedJob):
    """A slice of a run's traces, by a range of trace primary keys, evaluated by one task.

    `size` is how many selected traces the range held when the run was planned; `progress`
    how many of them are counted in the run's `done`: it grows with each stored batch, never
    goes down, and reaches `size` when the chunk is done. `lease_until` says until when the
    worker that claimed the chunk (or the message that carries it) is trusted; a chunk whose
    lease has expired is sent again.
    """

    evaluation = models.ForeignKey(Evaluation, on_delete=models.CASCADE, related_name="chunks")
    number = models.PositiveIntegerField()
    first_pk = models.BigIntegerField()
    last_pk = models.BigIntegerField()
    size = models.PositiveIntegerField()
    progress = models.PositiveIntegerField(default=0)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["evaluation", "number"], name="chunk_number_per_run")]
        indexes = [models.Index(fields=["status", "lease_until"], name="chunk_status_lease")]

    def __str__(self) -> str:
        return f"chunk {self.number} of evaluation {self.evaluation_id} ({self.status})"


class ByteOrderCharField(models.CharField):  # type: ignore[type-arg]
    """A CharField of ASCII codes compared byte by byte on PostgreSQL (collation "C").

    A result's `status` leads its run's index after the run: in the database's own
    collation every comparison of an insert's descent went through the locale (strcoll),
    which was half the cost of keeping that index up. The codes are lowercase ASCII, so
    their order and equality are the same in either collation; SQLite compares bytes anyway.
    """

    def db_parameters(self, connection: Any) -> dict[str, Any]:
        parameters: dict[str, Any] = super().db_parameters(connection)
        if connection.vendor == "postgresql":
            parameters["collation"] = "C"
        return parameters


class EvaluationResult(models.Model):
    """One guardrail revision evaluated against one trace, in a run or at the runtime.

    A result of no run (the runtime verdict, ingestion) is unique per trace, revision and
    stage of the turn (`stage` and `step`: empty and 0 for a whole trace, as ingestion and
    runs evaluate it); a run's result per trace, revision and run: a repeated evaluation
    stores nothing twice.

    The most written table: its foreign keys are kept by Django (which deletes and protects
    as `on_delete` says) and not by database constraints, whose per-row checks cost four
    fifths of an insert and lock the run's, tenant's and guardrail's rows from every
    writer at once (`traces.store.bulk` writes only keys it has just read). Results are looked up
    by run (`result_run_key`) and by trace (the unique key `result_per_trace_run_stage`
    leads with it), never by tenant, guardrail or revision alone (only deleting one of
    those, which the console does not do, would scan them), so those keys have no index of
    their own to keep up on every insert.

    A run also stores its `skipped` results, with `skip_reason` naming the part of the
    scope that did not select the trace (guardrails.engine.evaluate.SKIP_PARTS) and
    `reason` the sentence; the runtime verdict stores none.
    """

    class Status(models.TextChoices):
        PASS = "pass"  # noqa: S105 (a result status, not a password)
        FAIL = "fail"
        ERROR = "error"
        SKIPPED = "skipped"

    tenant = models.ForeignKey(Tenant, on_delete=models.PROTECT, related_name="+", db_constraint=False, db_index=False)
    trace = models.ForeignKey(
        RunTrace, on_delete=models.CASCADE, related_name="results", db_constraint=False, db_index=False
    )
    guardrail = models.ForeignKey(
        Guardrail, on_delete=models.PROTECT, related_name="+", db_constraint=False, db_index=False
    )
    revision = models.ForeignKey(
        GuardrailRevision, on_delete=models.PROTECT, related_name="+", db_constraint=False, db_index=False
    )
    evaluation = models.ForeignKey(
        Evaluation,
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        related_name="results",
        db_constraint=False,
        db_index=False,
    )
    mode = models.CharField(max_length=10, choices=MODES)
    status = ByteOrderCharField(max_length=10, choices=Status.choices)
    reason = models.TextField(blank=True)
    skip_reason = models.CharField(
        max_length=20, blank=True, default="", help_text="of a skipped result: the scope part that did not select"
    )
    shadow = models.BooleanField(default=False, help_text="of a guardrail in shadow: never a violation")
    stage = models.CharField(
        max_length=10,
        blank=True,
        default="",
        db_default="",
        help_text="the stage of the turn a runtime checked (input, tool-call, output); empty: the whole trace",
    )
    # An IntegerField, not a PositiveIntegerField: adding its CHECK would scan the table
    # under lock on upgrade; the writers only ever store a call's position (0 or more).
    step = models.IntegerField(
        default=0, db_default=0, help_text="at stage tool-call, the position of the proposed call in toolCalls"
    )
    duration_ms = models.FloatField(default=0.0)
    details = models.JSONField(default=dict)
    created_at = models.DateTimeField(default=timezone.now)

    objects = TenantScopedQuerySet.as_manager()

    class Meta:
        constraints = [
            # One key for a run's results and the runtime's (no run: 0, as no run has that
            # key), and the trace's index too (its first column): one index kept up per
            # insert where the trace's own and one partial key per kind were three.
            # A turn checked at its stages (`POST evaluate?stage=`) has a result per stage
            # and, at `tool-call`, per proposed call: they are in the key.
            models.UniqueConstraint(
                F("trace"),
                F("revision"),
                Coalesce(F("evaluation"), Value(0)),
                F("stage"),
                F("step"),
                name="result_per_trace_run_stage",
            )
        ]
        indexes = [
            # A run's results page is a keyset on (status, guardrail, id): each of its pages
            # reads one range of this index (filtered by guardrail and not by status, one per
            # status), as do a run's summary and the fails of a guardrail that compare reads.
            # Only a run's results are in it: the runtime's (no run), never read by run, cost
            # no index entries when ingestion and `POST evaluate` write them.
            models.Index(
                fields=["evaluation", "status", "guardrail", "id"],
                name="result_run_key",
                condition=models.Q(evaluation__isnull=False),
            )
        ]

    def __str__(self) -> str:
        return f"{self.guardrail_id}@{self.revision_id} on {self.trace_id}: {self.status}"


class PendingRuntimeEvaluation(Leased):
    """The outbox of ingestion: a stored batch whose runtime evaluation is not done yet.

    Written in the transaction that stores the traces, deleted by the task that evaluated
    them. A batch whose task could not be sent (the broker was down) or was lost is sent
    again by the periodic check once `lease_until` has passed, up to
    KINDGI_CHUNK_MAX_ATTEMPTS times (a batch whose evaluation keeps failing stays here):
    its `attempts` count those sends, not the ones a lost broker asked for.
    """

    trace_ids = models.JSONField(help_text="primary keys of the stored traces")
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        indexes = [models.Index(fields=["lease_until"], name="pending_runtime_lease")]

    def __str__(self) -> str:
        return f"runtime evaluation of {len(self.trace_ids)} traces (pending)"


class WorkerHeartbeat(models.Model):
    """A Celery worker's sign of life, written every KINDGI_WORKER_HEARTBEAT_SECONDS;
    pages of waiting work read it to say when no worker has been seen."""

    hostname = models.CharField(max_length=255, unique=True)
    pid = models.PositiveIntegerField(default=0)
    seen_at = models.DateTimeField(default=timezone.now, db_index=True)

    def __str__(self) -> str:
        return f"{self.hostname} (pid {self.pid}) seen {self.seen_at:%Y-%m-%d %H:%M:%S}"


class GuardrailPreview(Progress, Job):
    """An unsaved draft of a guardrail evaluated beside its current revision over stored traces.

    What an author learns before saving: which traces the draft newly fails, which it no
    longer fails, how many are unchanged. Read like a run (status, done / total) while a
    worker evaluates it; nothing is stored as a result or a violation. `changes` keeps the
    first PREVIEW_LISTED traces of each kind, and under `labelled_set` how the draft and the
    revision do on the guardrail's labelled set (traces.runs.preview_labels); judge calls are in the ledger under this
    preview (`JudgeLedgerEntry.preview`), and `judge_cost_usd` sums what they cost.
    """

    tenant = models.ForeignKey(Tenant, on_delete=models.PROTECT, related_name="+")
    draft = models.JSONField(help_text="the guardrail document as edited, unsaved")
    current = models.ForeignKey(
        GuardrailRevision,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
        help_text="the revision the draft is compared with (none: a new guardrail)",
    )
    trace_filters = models.JSONField(default=dict)
    mode = models.CharField(max_length=10, choices=MODES, default="ci")
    started_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    started_by_label = models.CharField(max_length=200, blank=True)
    total = models.PositiveIntegerField(default=0)
    done = models.PositiveIntegerField(default=0)
    counts = models.JSONField(default=dict)
    changes = models.JSONField(default=dict)
    judge_estimate_usd = models.DecimalField(max_digits=24, decimal_places=12, null=True, blank=True)
    judge_cost_usd = models.DecimalField(max_digits=24, decimal_places=12, default=0)
    error = models.TextField(blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    finished_at = models.DateTimeField(null=True, blank=True)

    objects = TenantScopedQuerySet.as_manager()

    class Meta:
        indexes = [models.Index(fields=["tenant", "-created_at"], name="preview_tenant_time")]

    def __str__(self) -> str:
        return f"preview {self.pk} of {self.draft.get('id')} ({self.status})"
