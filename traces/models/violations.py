"""Violations, their reviews and daily counts, and calibration samples of a guardrail's verdicts."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.conf import settings
from django.db import models
from django.utils import timezone

from guardrails.models import Guardrail, GuardrailRevision
from kindgi_console.tenancy.models import Tenant
from kindgi_console.tenancy.scoping import TenantScopedQuerySet
from traces.models.runs import Evaluation, EvaluationResult
from traces.models.traces import MODES, RunTrace

#: The action whose violations land in a review queue, and the queue of one that names none.
ESCALATE = "escalate"
DEFAULT_QUEUE = "escalations"
QUEUE_LENGTH = 200


def escalation_queue(document: Mapping[str, Any]) -> str | None:
    """The review queue a guardrail revision's violations land in: its `action.escalateTo`
    when its action is `escalate` (trimmed, at most QUEUE_LENGTH characters; DEFAULT_QUEUE
    when it names none), else None (no queue)."""
    action = document.get("action")
    if not isinstance(action, Mapping) or action.get("on-violation") != ESCALATE:
        return None
    named = action.get("escalateTo")
    queue = named.strip()[:QUEUE_LENGTH] if isinstance(named, str) else ""
    return queue or DEFAULT_QUEUE


class Violation(models.Model):
    """A finding: a guardrail revision failed a trace, kept for review whatever its action.

    One per (trace, revision) (`violation_per_trace_revision`): the same revision failing
    the same trace again (another run, a re-evaluation, the runtime, another stage of the
    turn) finds this violation and leaves it as it is, review and all; `result`,
    `evaluation` and `mode` are of the result that found it first, and every later `fail`
    result of the pair is linked to it by its trace and revision (a run's results list,
    `GET violations?evaluation=`). A new
    revision of the guardrail is a new finding. The trace's agent and flow and the
    guardrail's action and severity are copied here so that violation history filters
    without joins.

    `queue`: the review queue of a revision whose action is `escalate` (its `escalateTo`,
    `escalation_queue`), copied when the violation is stored; NULL for every other action.
    A person claims a violation (`assignee`, `assigned_at`: `traces.review.claims`) to tell
    the other reviewers that it is being handled; NULL while nobody holds it.
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
    # The trace's index is the unique key's (its first column).
    trace = models.ForeignKey(
        RunTrace, on_delete=models.CASCADE, related_name="violations", db_constraint=False, db_index=False
    )
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
        Evaluation, on_delete=models.CASCADE, null=True, blank=True, related_name="violations", db_constraint=False
    )
    action = models.CharField(max_length=100)
    severity = models.CharField(max_length=20, blank=True)
    mode = models.CharField(max_length=10, choices=MODES)
    reason = models.TextField(blank=True)
    agent = models.CharField(max_length=200, blank=True)
    flow = models.CharField(max_length=200, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    state = models.CharField(max_length=20, choices=State.choices, default=State.OPEN)
    # Set by a review, never by the writers of violations: no deferred check queued per
    # inserted violation, and only reviewed ones in its index (a user deleted looks them up).
    reviewed_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
        db_constraint=False,
        db_index=False,
    )
    reviewed_by_label = models.CharField(
        max_length=200, blank=True, help_text="the reviewer's name, or the API key's label"
    )
    reviewed_at = models.DateTimeField(null=True, blank=True)
    review_note = models.TextField(blank=True)
    # NULL rather than "" for "none": the partial indexes below then hold only queued (or
    # claimed) violations, and both databases know that `queue = 'x'` implies NOT NULL.
    queue = models.CharField(  # noqa: DJ001
        max_length=QUEUE_LENGTH, null=True, blank=True, help_text="the review queue of an escalate guardrail"
    )
    assignee = models.CharField(  # noqa: DJ001
        max_length=200, null=True, blank=True, help_text="who claimed it: a user name, or an API key's label"
    )
    assigned_at = models.DateTimeField(null=True, blank=True)

    objects = TenantScopedQuerySet.as_manager()

    class Meta:
        constraints = [
            # The writers insert ON CONFLICT DO NOTHING and count only what they inserted
            # in the daily roll-up: a finding found again is neither stored nor counted twice.
            models.UniqueConstraint(fields=["trace", "revision"], name="violation_per_trace_revision")
        ]
        indexes = [
            models.Index(fields=["tenant", "-created_at", "-id"], name="violation_tenant_time"),
            models.Index(fields=["tenant", "state", "-created_at"], name="violation_tenant_state"),
            models.Index(fields=["guardrail", "-created_at"], name="violation_guardrail_time"),
            models.Index(fields=["severity", "-created_at"], name="violation_severity_time"),
            # The overview's open violations by severity, counted up to a cap
            # (kindgi_console.paging.bounded_count): only open violations are in it.
            models.Index(
                fields=["tenant", "severity"], name="violation_open_severity", condition=models.Q(state="open")
            ),
            models.Index(
                fields=["reviewed_by"], name="violation_reviewed_by", condition=models.Q(reviewed_by__isnull=False)
            ),
            # A queue's violations newest first (`?queue=`), and its open ones per queue (the
            # overview's counts, the review queue, the age of the oldest for alert rules):
            # only escalated violations are in them, so the other writes pay for neither.
            models.Index(
                fields=["tenant", "queue", "-created_at", "-id"],
                name="violation_queue_time",
                condition=models.Q(queue__isnull=False),
            ),
            models.Index(
                fields=["tenant", "state", "queue", "created_at", "id"],
                name="violation_queue_state",
                condition=models.Q(queue__isnull=False),
            ),
            # A queue's open violations nobody claimed, counted up to a cap (the overview).
            models.Index(
                fields=["tenant", "queue"],
                name="violation_queue_unclaimed",
                condition=models.Q(state="open", queue__isnull=False, assignee__isnull=True),
            ),
            models.Index(
                fields=["assignee", "-created_at", "-id"],
                name="violation_assignee",
                condition=models.Q(assignee__isnull=False),
            ),
        ]

    def __str__(self) -> str:
        return f"{self.guardrail_id} on {self.trace_id} ({self.state})"


class ViolationReview(models.Model):
    """One change of a violation's review state: who, when, from what to what, and why.

    Written by `traces.review.workflow` only, never changed: the violation's review history.
    """

    tenant = models.ForeignKey(Tenant, on_delete=models.PROTECT, related_name="+")
    violation = models.ForeignKey(Violation, on_delete=models.CASCADE, related_name="reviews")
    reviewer = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
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


class ViolationDay(models.Model):
    """Violations counted per tenant, guardrail, revision, severity and day, with how many of
    them reviewers have reviewed and marked false positive (a roll-up for the chart and quality).

    Kept by `traces.store.violation_days`, in the same transaction as the violations it counts and
    as their review changes, so that the violation chart and a guardrail's quality
    (`traces.review.quality`) read a few rows per day instead of every violation. `day` is the
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
            )
        ]
        indexes = [models.Index(fields=["tenant", "day"], name="violation_day_tenant_day")]

    def __str__(self) -> str:
        return f"{self.day} {self.guardrail_id}@{self.revision_id} {self.severity}: {self.count}"


class CalibrationSample(models.Model):
    """Traces drawn from a guardrail's recent verdicts (of any kind) for people to label.

    Stratified: about half from its `fail` results and half from its `pass` results of
    `revision` (the one being calibrated); `fails_total` and `passes_total` are how many of
    each there were to draw from, so that recall weighs each stratum as it weighs in the
    traces (0 in samples drawn before they were kept: the sample's own proportions). For an
    llm-judge, `judge_model` names the model that judged them (the most common one), so
    that figures are known to be of that judge only.
    """

    tenant = models.ForeignKey(Tenant, on_delete=models.PROTECT, related_name="+")
    guardrail = models.ForeignKey(Guardrail, on_delete=models.PROTECT, related_name="+")
    revision = models.ForeignKey(GuardrailRevision, on_delete=models.PROTECT, related_name="+")
    judge_model = models.CharField(max_length=200, blank=True)
    size = models.PositiveIntegerField()
    fails_total = models.PositiveIntegerField(default=0, help_text="the revision's recent fails drawn from")
    passes_total = models.PositiveIntegerField(default=0, help_text="the revision's recent passes drawn from")
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


class CalibrationLabel(models.Model):
    """One person's label of one trace of a calibration sample.

    Several reviewers may label the same sample, each once per trace (`labeller` is the
    person's user name, or an API key's label): agreement between people is read from
    here. The item's own `label` is its first label, the people's verdict that the
    guardrail is measured against.
    """

    tenant = models.ForeignKey(Tenant, on_delete=models.PROTECT, related_name="+")
    item = models.ForeignKey(CalibrationItem, on_delete=models.CASCADE, related_name="labels")
    labeller = models.CharField(max_length=200)
    label = models.CharField(max_length=10, choices=CalibrationItem.Label.choices)
    labelled_at = models.DateTimeField(default=timezone.now)

    objects = TenantScopedQuerySet.as_manager()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["item", "labeller"], name="calibration_label_once")]

    def __str__(self) -> str:
        return f"{self.labeller}: {self.label} ({self.item_id})"
