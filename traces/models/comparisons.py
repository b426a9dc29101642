"""Two runs compared, kept with the traces whose verdict changed (`traces.runs.comparisons`)."""

from __future__ import annotations

from django.db import models
from django.utils import timezone

from guardrails.models import Guardrail
from kindgi_console.tenancy.models import Tenant
from kindgi_console.tenancy.scoping import TenantScopedQuerySet
from traces.models.runs import Evaluation
from traces.models.traces import RunTrace


class RunComparison(models.Model):
    """Two runs of a tenant compared, computed once in the background and kept (`traces.runs.comparisons`).

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

    comparison = models.ForeignKey(RunComparison, on_delete=models.CASCADE, related_name="changes", db_index=False)
    guardrail = models.ForeignKey(
        Guardrail, on_delete=models.PROTECT, related_name="+", db_constraint=False, db_index=False
    )
    trace = models.ForeignKey(RunTrace, on_delete=models.CASCADE, related_name="+", db_constraint=False)
    kind = models.CharField(max_length=20, choices=Kind.choices)
    reason = models.TextField(blank=True)

    class Meta:
        indexes = [
            # The lists are a keyset on id per guardrail and kind: each page reads one range.
            models.Index(fields=["comparison", "guardrail", "kind", "id"], name="comparison_change_key")
        ]

    def __str__(self) -> str:
        return f"{self.trace_id} {self.kind} {self.guardrail_id}"
