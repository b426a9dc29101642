"""The judge cost ledger: one entry per judge call, and its daily roll-up."""

from __future__ import annotations

from django.db import models
from django.utils import timezone

from guardrails.models import Guardrail, GuardrailRevision
from kindgi_console.tenancy.models import Tenant
from kindgi_console.tenancy.scoping import TenantScopedQuerySet
from traces.models.runs import Evaluation
from traces.models.traces import RunTrace


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
    revision = models.ForeignKey(GuardrailRevision, on_delete=models.PROTECT, null=True, blank=True, related_name="+")
    trace = models.ForeignKey(RunTrace, on_delete=models.SET_NULL, null=True, blank=True, related_name="+")
    trace_ref = models.CharField(max_length=200, blank=True)
    evaluation = models.ForeignKey(Evaluation, on_delete=models.SET_NULL, null=True, blank=True, related_name="+")
    preview = models.ForeignKey(
        "GuardrailPreview",
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
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
            # The ledger's sums (traces.judge.ledger.SUMS, grouped by guardrail, model or day) read
            # only these columns: on PostgreSQL they are answered from this index alone (an
            # index-only scan), without visiting the table. `outcome` is the short form.
            models.Index(
                fields=["tenant", "created_at"],
                include=[
                    "guardrail",
                    "model_id",
                    "input_tokens",
                    "output_tokens",
                    "cost_usd",
                    "over_budget_cost",
                    "over_budget_latency",
                    "cache_hit",
                    "billed",
                    "outcome",
                ],
                name="ledger_tenant_time_sums",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.model_id} {self.cost_usd} USD"

    @property
    def over_budget(self) -> bool:
        return self.over_budget_cost or self.over_budget_latency


class LedgerDay(models.Model):
    """The judge cost ledger summed per tenant, guardrail, judge model and day (a roll-up).

    Kept by `traces.judge.ledger.record`, the one way ledger entries are written, in the same
    transaction as the entries it adds up, so that the ledger's sums over whole days
    (`traces.judge.ledger.summarise`) read a few rows per day instead of every call. The counts
    mean what they mean in `traces.judge.ledger` (cache hits are not calls); `day` is the entry's
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
            models.UniqueConstraint(fields=["tenant", "guardrail", "model_id", "day"], name="ledger_day_unique")
        ]
        indexes = [models.Index(fields=["tenant", "day"], name="ledger_day_tenant_day")]

    def __str__(self) -> str:
        return f"{self.day} {self.model_id}: {self.calls} calls, {self.cost_usd} USD"
