"""Run traces, evaluation runs, their results, violations and the judge cost ledger.

Every model here belongs to one tenant and is read through `TenantScopedQuerySet.for_caller`.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import F, Value
from django.db.models.functions import Coalesce
from django.utils import timezone

from guardrails.models import Guardrail, GuardrailRevision
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
        "Upload", on_delete=models.SET_NULL, null=True, blank=True, related_name="traces",
        help_text="the upload that stored this trace, if one did",
    )

    objects = TenantScopedQuerySet.as_manager()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["tenant", "trace_id"], name="trace_id_per_tenant")
        ]
        indexes = [
            models.Index(fields=["tenant", "-received_at", "-id"], name="trace_tenant_received"),
            models.Index(fields=["tenant", "agent", "-received_at"], name="trace_tenant_agent"),
        ]

    def __str__(self) -> str:
        return f"{self.tenant_id}/{self.trace_id}"


class Evaluation(models.Model):
    """A batch evaluation run: which guardrails over which traces, and how far it got.

    Started by an author, run in the background; the pages read its status and progress
    from this row, never from a task backend. `guardrails` are the ids asked for (empty:
    every enabled one); `revisions` pins the revision of each, taken when the run is
    created, so that an edit during the run does not mix two versions. `trace_filters`
    selects the tenant's traces: `agent`, `flow`, `since`, `until` (received, ISO 8601)
    and `upload` (the traces an upload stored). The work is split in `chunks`.
    """

    class Status(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        SUCCEEDED = "succeeded"
        FAILED = "failed"
        CANCELLED = "cancelled"

    tenant = models.ForeignKey(Tenant, on_delete=models.PROTECT, related_name="evaluations")
    guardrails = models.JSONField(default=list, help_text="guardrail ids; empty: every enabled one")
    trace_filters = models.JSONField(default=dict)
    mode = models.CharField(max_length=10, choices=MODES, default="ci")
    started_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True
    )
    started_by_label = models.CharField(max_length=200, blank=True)
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.QUEUED)
    total = models.PositiveIntegerField(default=0)
    done = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(default=timezone.now)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    summary = models.JSONField(default=dict)
    error = models.TextField(blank=True)
    revisions = models.ManyToManyField(GuardrailRevision, related_name="+", blank=True)

    objects = TenantScopedQuerySet.as_manager()

    FINAL = (Status.SUCCEEDED, Status.FAILED, Status.CANCELLED)

    class Meta:
        indexes = [models.Index(fields=["tenant", "-created_at", "-id"], name="evaluation_tenant")]

    def __str__(self) -> str:
        return f"evaluation {self.pk} ({self.status})"

    @property
    def is_final(self) -> bool:
        return self.status in self.FINAL

    @property
    def percent(self) -> int:
        if self.total == 0:
            return 100 if self.is_final else 0
        return min(100, self.done * 100 // self.total)


class EvaluationChunk(models.Model):
    """A slice of a run's traces, by a range of trace primary keys, evaluated by one task.

    `size` is how many selected traces the range held when the run was planned; `progress`
    how many of them are counted in the run's `done`: it grows with each stored batch, never
    goes down, and reaches `size` when the chunk is done. `lease_until` says until when the
    worker that claimed the chunk (or the message that carries it) is trusted; a chunk whose
    lease has expired is sent again.
    """

    class Status(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        DONE = "done"
        CANCELLED = "cancelled"

    evaluation = models.ForeignKey(Evaluation, on_delete=models.CASCADE, related_name="chunks")
    number = models.PositiveIntegerField()
    first_pk = models.BigIntegerField()
    last_pk = models.BigIntegerField()
    size = models.PositiveIntegerField()
    progress = models.PositiveIntegerField(default=0)
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.QUEUED)
    lease_until = models.DateTimeField(null=True, blank=True)
    attempts = models.PositiveIntegerField(default=0)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["evaluation", "number"], name="chunk_number_per_run")
        ]
        indexes = [models.Index(fields=["status", "lease_until"], name="chunk_status_lease")]

    def __str__(self) -> str:
        return f"chunk {self.number} of evaluation {self.evaluation_id} ({self.status})"


class EvaluationResult(models.Model):
    """One guardrail revision evaluated against one trace, in a run or at the runtime.

    A result of no run (the runtime verdict, ingestion) is unique per trace and revision;
    a run's result per trace, revision and run: a repeated evaluation stores nothing twice.

    The most written table: its foreign keys are kept by Django (which deletes and protects
    as `on_delete` says) and not by database constraints, whose per-row checks cost four
    fifths of an insert and lock the run's, tenant's and guardrail's rows from every
    writer at once (`traces.bulk` writes only keys it has just read). Results are looked up
    by run (`result_run_status_key`, `result_run_guardrail_key`) and by trace (the unique
    key `result_per_trace_revision_run` leads with it), never by tenant, guardrail or revision
    alone (only deleting one of those, which the console does not do, would scan them), so
    those keys have no index of their own to keep up on every insert.

    A run also stores its `skipped` results, with `skip_reason` naming the part of the
    scope that did not select the trace (guardrails.engine.evaluate.SKIP_PARTS) and
    `reason` the sentence; the runtime verdict stores none.
    """

    class Status(models.TextChoices):
        PASS = "pass"  # noqa: S105 (a result status, not a password)
        FAIL = "fail"
        ERROR = "error"
        SKIPPED = "skipped"

    tenant = models.ForeignKey(
        Tenant, on_delete=models.PROTECT, related_name="+", db_constraint=False, db_index=False
    )
    trace = models.ForeignKey(RunTrace, on_delete=models.CASCADE, related_name="results", db_constraint=False,
                              db_index=False)
    guardrail = models.ForeignKey(
        Guardrail, on_delete=models.PROTECT, related_name="+", db_constraint=False, db_index=False
    )
    revision = models.ForeignKey(
        GuardrailRevision, on_delete=models.PROTECT, related_name="+", db_constraint=False, db_index=False
    )
    evaluation = models.ForeignKey(
        Evaluation, on_delete=models.CASCADE, null=True, blank=True, related_name="results",
        db_constraint=False, db_index=False,
    )
    mode = models.CharField(max_length=10, choices=MODES)
    status = models.CharField(max_length=10, choices=Status.choices)
    reason = models.TextField(blank=True)
    skip_reason = models.CharField(max_length=20, blank=True, default="",
                                   help_text="of a skipped result: the scope part that did not select")
    shadow = models.BooleanField(default=False, help_text="of a guardrail in shadow: never a violation")
    duration_ms = models.FloatField(default=0.0)
    details = models.JSONField(default=dict)
    created_at = models.DateTimeField(default=timezone.now)

    objects = TenantScopedQuerySet.as_manager()

    class Meta:
        constraints = [
            # One key for a run's results and the runtime's (no run: 0, as no run has that
            # key), and the trace's index too (its first column): one index kept up per
            # insert where the trace's own and one partial key per kind were three.
            models.UniqueConstraint(
                F("trace"), F("revision"), Coalesce(F("evaluation"), Value(0)), name="result_per_trace_revision_run",
            ),
        ]
        indexes = [
            # A run's results page is a keyset on (status, id), filtered by guardrail or not:
            # each of its pages reads one range of one of these two indexes. Only a run's
            # results are in them: the runtime's (no run), never read by run, cost no
            # index entries when ingestion and `POST evaluate` write them.
            models.Index(fields=["evaluation", "status", "id"], name="result_run_status_key",
                         condition=models.Q(evaluation__isnull=False)),
            models.Index(fields=["evaluation", "guardrail", "status", "id"], name="result_run_guardrail_key",
                         condition=models.Q(evaluation__isnull=False)),
        ]

    def __str__(self) -> str:
        return f"{self.guardrail_id}@{self.revision_id} on {self.trace_id}: {self.status}"


class Violation(models.Model):
    """A `fail` result, kept for review whatever its action.

    The trace's agent and flow and the guardrail's action and severity are copied here so
    that violation history filters without joins.
    """

    class State(models.TextChoices):
        OPEN = "open"
        ACKNOWLEDGED = "acknowledged"
        RESOLVED = "resolved"
        FALSE_POSITIVE = "false-positive"

    # Kept by Django, not by database constraints, as a result's keys are (see EvaluationResult):
    # six deferred checks per violation were a fifth of a run's database time. The tenant's
    # and the guardrail's own indexes would repeat the first column of the ones below.
    tenant = models.ForeignKey(
        Tenant, on_delete=models.PROTECT, related_name="violations", db_constraint=False, db_index=False
    )
    trace = models.ForeignKey(RunTrace, on_delete=models.CASCADE, related_name="violations", db_constraint=False)
    result = models.OneToOneField(
        EvaluationResult, on_delete=models.CASCADE, related_name="violation", db_constraint=False
    )
    guardrail = models.ForeignKey(
        Guardrail, on_delete=models.PROTECT, related_name="violations", db_constraint=False, db_index=False
    )
    revision = models.ForeignKey(
        GuardrailRevision, on_delete=models.PROTECT, related_name="+", db_constraint=False, db_index=False
    )
    evaluation = models.ForeignKey(
        Evaluation, on_delete=models.CASCADE, null=True, blank=True, related_name="violations",
        db_constraint=False,
    )
    action = models.CharField(max_length=100)
    severity = models.CharField(max_length=20, blank=True)
    mode = models.CharField(max_length=10, choices=MODES)
    reason = models.TextField(blank=True)
    agent = models.CharField(max_length=200, blank=True)
    flow = models.CharField(max_length=200, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    state = models.CharField(max_length=20, choices=State.choices, default=State.OPEN)
    reviewed_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True,
        related_name="+",
    )
    reviewed_by_label = models.CharField(
        max_length=200, blank=True, help_text="the reviewer's name, or the API key's label"
    )
    reviewed_at = models.DateTimeField(null=True, blank=True)
    review_note = models.TextField(blank=True)

    objects = TenantScopedQuerySet.as_manager()

    class Meta:
        indexes = [
            models.Index(fields=["tenant", "-created_at", "-id"], name="violation_tenant_time"),
            models.Index(fields=["tenant", "state", "-created_at"], name="violation_tenant_state"),
            models.Index(fields=["guardrail", "-created_at"], name="violation_guardrail_time"),
            models.Index(fields=["severity", "-created_at"], name="violation_severity_time"),
        ]

    def __str__(self) -> str:
        return f"{self.guardrail_id} on {self.trace_id} ({self.state})"


class ViolationReview(models.Model):
    """One change of a violation's review state: who, when, from what to what, and why.

    Written by `traces.review` only, never changed: the violation's review history.
    """

    tenant = models.ForeignKey(Tenant, on_delete=models.PROTECT, related_name="+")
    violation = models.ForeignKey(Violation, on_delete=models.CASCADE, related_name="reviews")
    reviewer = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True,
        related_name="+",
    )
    reviewer_label = models.CharField(max_length=200, blank=True)
    from_state = models.CharField(max_length=20, choices=Violation.State.choices)
    to_state = models.CharField(max_length=20, choices=Violation.State.choices)
    note = models.TextField(blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    objects = TenantScopedQuerySet.as_manager()

    class Meta:
        indexes = [models.Index(fields=["violation", "created_at"], name="review_violation_time")]

    def __str__(self) -> str:
        return f"violation {self.violation_id}: {self.from_state} -> {self.to_state}"


class JudgeLedgerEntry(models.Model):
    """One call to a judge model's provider, with what it cost, under the guardrail it judged.

    Tokens are as the provider reported them (null when it reported none); cost is exact
    (registered prices times tokens, twelve decimal places: prices have at most six).
    `billed`: the provider reported usage, even if its answer was then unusable.
    `outcome` is the short form (PASS, FAIL, the score, or "error"); `verdict`, `score`,
    `reason` and `error` the details. A cache hit is a row too (`cache_hit`, never billed,
    cost zero) so that the ledger shows what the cache saved. The budget flags compare the
    call with the guardrail's declarative budget. `trace_ref` is the runtime's trace id,
    kept when the trace itself is not stored (`POST evaluate?store=false`).
    """

    tenant = models.ForeignKey(Tenant, on_delete=models.PROTECT, related_name="ledger_entries")
    guardrail = models.ForeignKey(Guardrail, on_delete=models.PROTECT, related_name="+")
    revision = models.ForeignKey(
        GuardrailRevision, on_delete=models.PROTECT, null=True, blank=True, related_name="+"
    )
    trace = models.ForeignKey(
        RunTrace, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    trace_ref = models.CharField(max_length=200, blank=True)
    evaluation = models.ForeignKey(
        Evaluation, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    preview = models.ForeignKey(
        "GuardrailPreview", on_delete=models.SET_NULL, null=True, blank=True, related_name="+",
        help_text="a preview's spend: a draft judged before it was saved",
    )
    model_id = models.CharField(max_length=200)
    provider = models.CharField(max_length=20, blank=True)
    model_name = models.CharField(max_length=200, blank=True)
    input_tokens = models.PositiveIntegerField(null=True, blank=True)
    output_tokens = models.PositiveIntegerField(null=True, blank=True)
    cost_usd = models.DecimalField(max_digits=24, decimal_places=12, default=0)
    latency_ms = models.PositiveIntegerField(default=0)
    outcome = models.CharField(max_length=300, help_text="the verdict, the score, or the error")
    verdict = models.CharField(max_length=4, blank=True)
    score = models.FloatField(null=True, blank=True)
    reason = models.TextField(blank=True)
    error = models.TextField(blank=True)
    billed = models.BooleanField(default=True)
    attempts = models.PositiveSmallIntegerField(default=1)
    over_budget_cost = models.BooleanField(default=False)
    over_budget_latency = models.BooleanField(default=False)
    cache_hit = models.BooleanField(default=False)
    created_at = models.DateTimeField(default=timezone.now)

    objects = TenantScopedQuerySet.as_manager()

    class Meta:
        verbose_name_plural = "judge ledger entries"
        indexes = [
            models.Index(fields=["tenant", "created_at"], name="ledger_tenant_time"),
            models.Index(fields=["guardrail", "created_at"], name="ledger_guardrail_time"),
            # The ledger's sums (traces.ledger.SUMS, grouped by guardrail, model or day) read
            # only these columns: on PostgreSQL they are answered from this index alone (an
            # index-only scan), without visiting the table. `outcome` is the short form.
            models.Index(
                fields=["tenant", "created_at"],
                include=[
                    "guardrail", "model_id", "input_tokens", "output_tokens", "cost_usd",
                    "over_budget_cost", "over_budget_latency", "cache_hit", "billed", "outcome",
                ],
                name="ledger_tenant_time_sums",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.model_id} {self.cost_usd} USD"

    @property
    def over_budget(self) -> bool:
        return self.over_budget_cost or self.over_budget_latency


def upload_path(upload: Upload, filename: str) -> str:
    return f"uploads/{upload.tenant_id}/{timezone.now():%Y/%m/%d}/{filename}"


class LedgerDay(models.Model):
    """The judge cost ledger summed per tenant, guardrail, judge model and day (a roll-up).

    Kept by `traces.ledger.record`, the one way ledger entries are written, in the same
    transaction as the entries it adds up, so that the ledger's sums over whole days
    (`traces.ledger.summarise`) read a few rows per day instead of every call. The counts
    mean what they mean in `traces.ledger` (cache hits are not calls); `day` is the entry's
    `created_at` date in the console's time zone, as `TruncDate` gives it.
    """

    tenant = models.ForeignKey(Tenant, on_delete=models.PROTECT, related_name="+")
    guardrail = models.ForeignKey(Guardrail, on_delete=models.PROTECT, related_name="+")
    model_id = models.CharField(max_length=200)
    day = models.DateField()
    calls = models.PositiveBigIntegerField(default=0)
    billed_calls = models.PositiveBigIntegerField(default=0)
    cache_hits = models.PositiveBigIntegerField(default=0)
    errors = models.PositiveBigIntegerField(default=0)
    over_budget = models.PositiveBigIntegerField(default=0)
    over_cost = models.PositiveBigIntegerField(default=0)
    over_latency = models.PositiveBigIntegerField(default=0)
    input_tokens = models.PositiveBigIntegerField(default=0)
    output_tokens = models.PositiveBigIntegerField(default=0)
    # As exact as the entries' own costs (twelve places), with room for a day's sum.
    cost_usd = models.DecimalField(max_digits=30, decimal_places=12, default=0)

    objects = TenantScopedQuerySet.as_manager()

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["tenant", "guardrail", "model_id", "day"], name="ledger_day_unique"
            ),
        ]
        indexes = [models.Index(fields=["tenant", "day"], name="ledger_day_tenant_day")]

    def __str__(self) -> str:
        return f"{self.day} {self.model_id}: {self.calls} calls, {self.cost_usd} USD"


class ViolationDay(models.Model):
    """Violations counted per tenant, guardrail, revision, severity and day, with how many of
    them reviewers have reviewed and marked false positive (a roll-up for the chart and quality).

    Kept by `traces.violation_days`, in the same transaction as the violations it counts and
    as their review changes, so that the violation chart and a guardrail's quality
    (`guardrails.quality`) read a few rows per day instead of every violation. `day` is the
    violation's `created_at` date in the console's time zone, as `TruncDate` gives it.
    `reviewed` counts the violations out of `open` (acknowledged, resolved, false positive),
    `false_positives` those marked false positive; the other review states are not counted
    here (a chart filtered by them reads the violations).
    """

    tenant = models.ForeignKey(Tenant, on_delete=models.PROTECT, related_name="+")
    guardrail = models.ForeignKey(Guardrail, on_delete=models.PROTECT, related_name="+")
    revision = models.ForeignKey(GuardrailRevision, on_delete=models.PROTECT, related_name="+")
    severity = models.CharField(max_length=20, blank=True)
    day = models.DateField()
    count = models.BigIntegerField(default=0)
    reviewed = models.BigIntegerField(default=0)
    false_positives = models.BigIntegerField(default=0)

    objects = TenantScopedQuerySet.as_manager()

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["tenant", "guardrail", "revision", "severity", "day"], name="violation_day_unique"
            ),
        ]
        indexes = [models.Index(fields=["tenant", "day"], name="violation_day_tenant_day")]

    def __str__(self) -> str:
        return f"{self.day} {self.guardrail_id}@{self.revision_id} {self.severity}: {self.count}"


class Upload(models.Model):
    """A file of traces (.json, .jsonl, either gzip-compressed) uploaded from a page.

    The file is streamed to MEDIA_ROOT and processed in the background, line by line (or
    element by element for a JSON array): bounded memory whatever its size. Counts say
    what became of the traces; `errors` keeps the first bad lines (line number and reason,
    at most KINDGI_UPLOAD_MAX_ERRORS of them, `errors_total` counts all). With
    `evaluate_after`, an evaluation of the stored traces starts when processing ends.
    """

    class Status(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        SUCCEEDED = "succeeded"
        FAILED = "failed"

    tenant = models.ForeignKey(Tenant, on_delete=models.PROTECT, related_name="uploads")
    uploaded_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    file = models.FileField(upload_to=upload_path, max_length=500)
    original_name = models.CharField(max_length=300)
    size = models.PositiveBigIntegerField(default=0)
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.QUEUED)
    bytes_read = models.PositiveBigIntegerField(default=0)
    lines_total = models.PositiveIntegerField(default=0)
    lines_stored = models.PositiveIntegerField(default=0)
    lines_duplicate = models.PositiveIntegerField(default=0)
    lines_conflict = models.PositiveIntegerField(default=0)
    lines_invalid = models.PositiveIntegerField(default=0)
    errors = models.JSONField(default=list, help_text='[{"line": n, "path": "...", "message": "..."}]')
    errors_total = models.PositiveIntegerField(default=0)
    failure = models.TextField(blank=True, help_text="why the file as a whole could not be read")
    lease_until = models.DateTimeField(null=True, blank=True, help_text="until when its worker is trusted")
    resume_offset = models.PositiveBigIntegerField(
        default=0, help_text="decompressed bytes read up to the last stored batch (JSON Lines)")
    resume_at = models.PositiveIntegerField(
        default=0, help_text="lines (JSON Lines) or elements (JSON array) read up to the last stored batch")
    claim = models.PositiveIntegerField(default=0, help_text="raised by every task that takes the upload")
    attempts = models.PositiveSmallIntegerField(default=0, help_text="tasks taken since the last stored batch")
    evaluate_after = models.BooleanField(default=False)
    evaluation = models.ForeignKey(
        Evaluation, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    created_at = models.DateTimeField(default=timezone.now)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    objects = TenantScopedQuerySet.as_manager()

    FINAL = (Status.SUCCEEDED, Status.FAILED)

    class Meta:
        indexes = [models.Index(fields=["tenant", "-created_at", "-id"], name="upload_tenant")]

    def __str__(self) -> str:
        return f"upload {self.pk} {self.original_name} ({self.status})"

    @property
    def is_final(self) -> bool:
        return self.status in self.FINAL

    @property
    def done(self) -> int:
        """Progress in bytes of the (possibly compressed) file read so far."""
        return self.size if self.is_final else min(self.bytes_read, self.size)

    @property
    def total(self) -> int:
        return self.size


class PendingRuntimeEvaluation(models.Model):
    """The outbox of ingestion: a stored batch whose runtime evaluation is not done yet.

    Written in the transaction that stores the traces, deleted by the task that evaluated
    them. A batch whose task could not be sent (the broker was down) or was lost is sent
    again by the periodic check once `lease_until` has passed, up to
    KINDGI_CHUNK_MAX_ATTEMPTS times (a batch whose evaluation keeps failing stays here).
    """

    trace_ids = models.JSONField(help_text="primary keys of the stored traces")
    created_at = models.DateTimeField(default=timezone.now)
    lease_until = models.DateTimeField(help_text="until when the task sent for it is trusted")
    resent = models.PositiveSmallIntegerField(default=0, help_text="times the periodic check sent it")

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
        constraints = [
            models.UniqueConstraint(fields=["tenant", "otel_trace_id", "span_id"], name="pending_span_once")
        ]
        indexes = [models.Index(fields=["received_at"], name="pending_span_received")]

    def __str__(self) -> str:
        return f"{self.tenant_id}/{self.otel_trace_id}/{self.span_id}"


class RetentionPolicy(models.Model):
    """How long a tenant's history is kept: traces (with their results, violations and
    reviews), results and judge ledger entries older than `days` are deleted, in batches,
    by the periodic retention task (`traces.retention`). A tenant without one keeps all.
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


class GuardrailPreview(models.Model):
    """An unsaved draft of a guardrail evaluated beside its current revision over stored traces.

    What an author learns before saving: which traces the draft newly fails, which it no
    longer fails, how many are unchanged. Read like a run (status, done / total) while a
    worker evaluates it; nothing is stored as a result or a violation. `changes` keeps the
    first PREVIEW_LISTED traces of each kind; judge calls are in the ledger under this
    preview (`JudgeLedgerEntry.preview`), and `judge_cost_usd` sums what they cost.
    """

    class Status(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        SUCCEEDED = "succeeded"
        FAILED = "failed"

    tenant = models.ForeignKey(Tenant, on_delete=models.PROTECT, related_name="+")
    draft = models.JSONField(help_text="the guardrail document as edited, unsaved")
    current = models.ForeignKey(
        GuardrailRevision, on_delete=models.SET_NULL, null=True, blank=True, related_name="+",
        help_text="the revision the draft is compared with (none: a new guardrail)",
    )
    trace_filters = models.JSONField(default=dict)
    mode = models.CharField(max_length=10, choices=MODES, default="ci")
    started_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True,
                                   related_name="+")
    started_by_label = models.CharField(max_length=200, blank=True)
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.QUEUED)
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

    FINAL = (Status.SUCCEEDED, Status.FAILED)

    class Meta:
        indexes = [models.Index(fields=["tenant", "-created_at"], name="preview_tenant_time")]

    def __str__(self) -> str:
        return f"preview {self.pk} of {self.draft.get('id')} ({self.status})"

    @property
    def is_final(self) -> bool:
        return self.status in self.FINAL

    @property
    def percent(self) -> int:
        if self.total == 0:
            return 100 if self.is_final else 0
        return min(100, self.done * 100 // self.total)


class CalibrationSample(models.Model):
    """Traces drawn from an llm-judge guardrail's recent verdicts for people to label.

    Stratified: about half from its `fail` results and half from its `pass` results of
    `revision` (the judge being calibrated); `judge_model` names the model that judged them
    (the most common one), so that figures are known to be of that judge only.
    """

    tenant = models.ForeignKey(Tenant, on_delete=models.PROTECT, related_name="+")
    guardrail = models.ForeignKey(Guardrail, on_delete=models.PROTECT, related_name="+")
    revision = models.ForeignKey(GuardrailRevision, on_delete=models.PROTECT, related_name="+")
    judge_model = models.CharField(max_length=200, blank=True)
    size = models.PositiveIntegerField()
    created_by_label = models.CharField(max_length=200, blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    objects = TenantScopedQuerySet.as_manager()

    class Meta:
        indexes = [models.Index(fields=["guardrail", "-created_at"], name="calibration_guardrail")]

    def __str__(self) -> str:
        return f"calibration {self.pk} of {self.guardrail_id}@{self.revision_id}"


class CalibrationItem(models.Model):
    """One trace of a calibration sample: the judge's verdict and, once labelled, a person's."""

    class Label(models.TextChoices):
        PASS = "pass"  # noqa: S105 (a label, not a password)
        FAIL = "fail"

    tenant = models.ForeignKey(Tenant, on_delete=models.PROTECT, related_name="+")
    sample = models.ForeignKey(CalibrationSample, on_delete=models.CASCADE, related_name="items")
    trace = models.ForeignKey(RunTrace, on_delete=models.CASCADE, related_name="+")
    judge_status = models.CharField(max_length=10, choices=Label.choices)
    judge_reason = models.TextField(blank=True)
    label = models.CharField(max_length=10, choices=Label.choices, blank=True)
    labelled_by_label = models.CharField(max_length=200, blank=True)
    labelled_at = models.DateTimeField(null=True, blank=True)

    objects = TenantScopedQuerySet.as_manager()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["sample", "trace"], name="calibration_trace_once")]

    def __str__(self) -> str:
        return f"{self.trace_id}: judge {self.judge_status}, people {self.label or '-'}"


class RunComparison(models.Model):
    """Two runs of a tenant compared, computed once in the background and kept (`traces.comparisons`).

    Per guardrail both runs evaluated: its failures in each and how many traces newly fail
    and no longer fail (`guardrails`, a list of figures), each such trace kept as a
    `ComparisonChange` so that the lists page by a keyset. The pages and the API read this
    row and those, never the runs' results, so they answer in the same time for runs of
    any size; the task that fills them writes its progress here, like a run. Only finished
    runs are compared (their results no longer change); deleting results (retention)
    deletes the comparisons of their runs, which are computed again when next asked for.
    """

    class Status(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        SUCCEEDED = "succeeded"
        FAILED = "failed"

    tenant = models.ForeignKey(Tenant, on_delete=models.PROTECT, related_name="+")
    evaluation = models.ForeignKey(Evaluation, on_delete=models.CASCADE, related_name="comparisons")
    other = models.ForeignKey(Evaluation, on_delete=models.CASCADE, related_name="+")
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.QUEUED)
    total = models.PositiveIntegerField(default=0, help_text="guardrails to compare")
    done = models.PositiveIntegerField(default=0)
    guardrails = models.JSONField(default=list, help_text="per shared guardrail: failures and changes counted")
    error = models.TextField(blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    objects = TenantScopedQuerySet.as_manager()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["evaluation", "other"], name="comparison_once")]

    def __str__(self) -> str:
        return f"evaluation {self.evaluation_id} against {self.other_id} ({self.status})"

    @property
    def percent(self) -> int:
        if self.total == 0:
            return 100 if self.status == self.Status.SUCCEEDED else 0
        return min(100, self.done * 100 // self.total)


class ComparisonChange(models.Model):
    """A trace that newly fails, or no longer fails, a guardrail from one compared run to the other."""

    class Kind(models.TextChoices):
        NEWLY_FAILING = "newly-failing"
        NO_LONGER_FAILING = "no-longer-failing"

    comparison = models.ForeignKey(RunComparison, on_delete=models.CASCADE, related_name="changes",
                                   db_index=False)
    guardrail = models.ForeignKey(Guardrail, on_delete=models.PROTECT, related_name="+", db_constraint=False,
                                  db_index=False)
    trace = models.ForeignKey(RunTrace, on_delete=models.CASCADE, related_name="+", db_constraint=False)
    kind = models.CharField(max_length=20, choices=Kind.choices)
    reason = models.TextField(blank=True)

    class Meta:
        indexes = [
            # The lists are a keyset on id per guardrail and kind: each page reads one range.
            models.Index(fields=["comparison", "guardrail", "kind", "id"], name="comparison_change_key"),
        ]

    def __str__(self) -> str:
        return f"{self.trace_id} {self.kind} {self.guardrail_id}"
