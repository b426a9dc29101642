"""A run compared with earlier results, kept with the traces whose verdict changed or stayed a
failure (`traces.runs.comparisons`)."""

from __future__ import annotations

from django.db import models
from django.utils import timezone

from guardrails.models import Guardrail, GuardrailRevision
from kindgi_console.jobs import Job, Progress
from kindgi_console.tenancy.models import Tenant
from kindgi_console.tenancy.scoping import TenantScopedQuerySet
from traces.models.runs import Evaluation
from traces.models.traces import RunTrace


class RunComparison(Progress, Job):
    """A run compared with earlier results, computed once in the background and kept
    (`traces.runs.comparisons`).

    Without `other`, each guardrail revision the run evaluated is compared, trace by trace,
    with that guardrail's latest earlier result on the trace (any revision, from a run or
    the runtime); with `other`, with that run's results. Per revision (`guardrails`, a list
    of figures): how many traces newly fail, no longer fail and still fail, how many were
    not compared and why, each such trace kept as a `ComparisonChange` so that the lists
    page by a keyset. The pages and the API read this row and those, never the results,
    so they answer in the same time for runs of any size; the task that fills them writes
    its progress here, like a run. Only finished runs are compared (their results no
    longer change); deleting results (retention) deletes the comparisons of the runs
    whose results go, which are computed again when next asked for.
    """

    tenant = models.ForeignKey(Tenant, on_delete=models.PROTECT, related_name="+")
    evaluation = models.ForeignKey(Evaluation, on_delete=models.CASCADE, related_name="comparisons")
    other = models.ForeignKey(
        Evaluation,
        on_delete=models.CASCADE,
        related_name="+",
        null=True,
        blank=True,
        help_text="the run compared with; none: each guardrail's latest earlier results",
    )
    total = models.PositiveIntegerField(default=0, help_text="results to compare")
    done = models.PositiveIntegerField(default=0)
    guardrails = models.JSONField(
        default=list, help_text="per revision of the run: what was compared, what changed, what was not and why"
    )
    error = models.TextField(blank=True)
    position = models.JSONField(
        default=dict, blank=True, help_text="where the computation stopped: the next task continues from it"
    )
    created_at = models.DateTimeField(default=timezone.now)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    objects = TenantScopedQuerySet.as_manager()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["evaluation", "other"], name="comparison_once"),
            # NULLs are distinct in a unique key: the comparison with earlier results has its own.
            models.UniqueConstraint(
                fields=["evaluation"], condition=models.Q(other__isnull=True), name="comparison_with_earlier_once"
            ),
        ]

    def __str__(self) -> str:
        against = f"run {self.other_id}" if self.other_id else "earlier results"
        return f"evaluation {self.evaluation_id} against {against} ({self.status})"


class ComparisonChange(models.Model):
    """A trace that newly fails, no longer fails, or still fails a guardrail revision of the
    compared run, with the earlier result it was compared with (its run, or the runtime)."""

    class Kind(models.TextChoices):
        NEWLY_FAILING = "newly-failing"
        NO_LONGER_FAILING = "no-longer-failing"
        STILL_FAILING = "still-failing"

    comparison = models.ForeignKey(RunComparison, on_delete=models.CASCADE, related_name="changes", db_index=False)
    guardrail = models.ForeignKey(
        Guardrail, on_delete=models.PROTECT, related_name="+", db_constraint=False, db_index=False
    )
    revision = models.ForeignKey(
        GuardrailRevision, on_delete=models.PROTECT, related_name="+", db_constraint=False, db_index=False
    )
    trace = models.ForeignKey(RunTrace, on_delete=models.CASCADE, related_name="+", db_constraint=False)
    kind = models.CharField(max_length=20, choices=Kind.choices)
    reason = models.TextField(blank=True, help_text="the failure's reason: the run's, or the earlier one's")
    # Plain numbers, not keys: what the earlier result was, said on the list, whatever became of it.
    earlier_run = models.BigIntegerField(null=True, blank=True, help_text="the earlier result's run; none: the runtime")
    earlier_revision = models.PositiveIntegerField(null=True, blank=True, help_text="the earlier result's revision")

    class Meta:
        indexes = [
            # The lists are a keyset on id per revision and kind: each page reads one range.
            models.Index(fields=["comparison", "revision", "kind", "id"], name="comparison_change_list")
        ]

    def __str__(self) -> str:
        return f"{self.trace_id} {self.kind} {self.guardrail_id}"
