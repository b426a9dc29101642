"""Guardrails as authored (the wire document) and their immutable revisions."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import models
from django.utils import timezone

from guardrails.fields import AuthoredJSONField
from kindgi_console.tenancy.scoping import NOTHING, Caller


class GuardrailQuerySet(models.QuerySet["Guardrail"]):
    def live(self) -> GuardrailQuerySet:
        """Not deleted."""
        return self.filter(deleted_at__isnull=True)

    def enabled(self) -> GuardrailQuerySet:
        """What runtimes, ingestion and the export enforce."""
        return self.live().filter(enabled=True)

    def applying_to(self, tenant_id: int | None) -> GuardrailQuerySet:
        """The console-wide guardrails and those of the tenant (None: console-wide only)."""
        return self.filter(models.Q(tenant__isnull=True) | models.Q(tenant_id=tenant_id))

    def for_caller(self, caller: Caller, scope: str = "read") -> GuardrailQuerySet:
        """What the caller may do `scope` on: reading includes the console-wide guardrails,
        writing them is for console admins only. Another tenant's guardrail is not there."""
        condition = caller.guardrail_filter(scope)
        if condition is None:
            return self.all()
        if condition is NOTHING:
            return self.none()
        return self.filter(condition)


class Guardrail(models.Model):
    """A guardrail of one tenant (`tenant`), or of the whole console (`tenant` is None).

    A tenant's guardrail selects only that tenant's traces; its authors and tenant-bound
    keys write it. A console-wide guardrail selects tenants with its `scope.tenants`, and
    only console admins (superusers, keys bound to no tenant) write it.

    `document` is the wire document (schema 1.1.0) exactly as authored, so that export and
    import round-trip; the other columns are copied from it for the pages to filter on.
    `enabled` is the console's switch, not part of the document; so are `shadow` (with its
    sampling rate and `enforced_revision`: in shadow, the current revision is evaluated and
    recorded but never halts nor makes a violation, while `enforced_revision`, when set, is
    still enforced beside it until the shadow one is promoted), `stages` (where a runtime's
    check of a turn applies it: None, its check's defaults) and `on_error`, what an `error`
    does to the turn: `pass` (the turn goes on) or `halt` (fail closed, for `halt` guardrails
    only). The export shows none of them: the document stays 1.1.0. Deleting sets
    `deleted_at`, so that results and violations keep naming their revision.
    """

    guardrail_id = models.CharField(max_length=200, unique=True)
    tenant = models.ForeignKey(
        "tenancy.Tenant",
        on_delete=models.PROTECT,
        null=True,
        blank=True,
        related_name="guardrails",
        help_text="the owner; empty: the whole console",
    )
    document = AuthoredJSONField()
    name = models.CharField(max_length=300, blank=True)
    kind = models.CharField(max_length=100, db_index=True)
    check_name = models.CharField(max_length=200, db_index=True, help_text="the check id")
    severity = models.CharField(max_length=20, blank=True, db_index=True)
    on_violation = models.CharField(max_length=100)
    enabled = models.BooleanField(default=True)
    shadow = models.BooleanField(
        default=False, help_text="its current revision is evaluated and recorded, never halting and never a violation"
    )
    shadow_sample_rate = models.FloatField(
        null=True, blank=True, help_text="in shadow, the share of matching traces evaluated (none: every one)"
    )
    enforced_revision = models.PositiveIntegerField(
        null=True,
        blank=True,
        help_text="in shadow, the revision still enforced beside the shadow one until it is promoted (none: none)",
    )
    stages = models.JSONField(
        null=True,
        blank=True,
        default=None,
        help_text="the stages of a turn at which it applies at runtime (none: its check's defaults)",
    )
    on_error = models.CharField(
        max_length=8,
        choices=[("pass", "pass"), ("halt", "halt")],
        default="pass",
        help_text="an error at runtime: pass (the turn goes on) or halt (fail closed; halt guardrails only)",
    )
    revision = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(default=timezone.now)
    deleted_at = models.DateTimeField(null=True, blank=True)

    objects = GuardrailQuerySet.as_manager()

    class Meta:
        ordering = ["guardrail_id"]

    def __str__(self) -> str:
        return self.guardrail_id

    def copy_columns(self) -> None:
        """Refresh the filter columns from the document."""
        doc: dict[str, Any] = self.document
        self.guardrail_id = str(doc["id"])
        self.name = str(doc.get("name") or "")
        self.kind = str(doc["kind"])
        self.check_name = str(doc["check"])
        self.severity = str(doc.get("severity") or "")
        self.on_violation = str(doc["action"]["on-violation"])


class GuardrailRevision(models.Model):
    """One saved version of a guardrail: never changed, never deleted.

    Results and violations point here, so that they say which document they judged by.
    `created_by` is the user; `created_by_label` also names an API key.
    """

    guardrail = models.ForeignKey(Guardrail, on_delete=models.PROTECT, related_name="revisions")
    number = models.PositiveIntegerField()
    document = AuthoredJSONField()
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True)
    created_by_label = models.CharField(max_length=200, blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["guardrail", "-number"]
        constraints = [models.UniqueConstraint(fields=["guardrail", "number"], name="revision_number")]

    def __str__(self) -> str:
        return f"{self.guardrail.guardrail_id}@{self.number}"


class JudgeModelRegistration(models.Model):
    """A judge model the llm-judge strategy may route to, in the registry's wire shape.

    `model_id` is the console's id (`id` on the wire); `api_key_env` is only the NAME of the
    environment variable that holds the provider's key: keys never enter the database.
    Prices are exact decimals per million tokens. A disabled registration is kept (the
    ledger names it) but never routed to.
    """

    model_id = models.CharField(max_length=100, unique=True)
    provider = models.CharField(max_length=20)
    model = models.CharField(max_length=200, help_text="the provider's model name")
    base_url = models.CharField(max_length=500)
    api_key_env = models.CharField(max_length=128, blank=True, help_text="name of the env var")
    input_usd_per_mtok = models.DecimalField(max_digits=18, decimal_places=6)
    output_usd_per_mtok = models.DecimalField(max_digits=18, decimal_places=6)
    capabilities = models.JSONField(default=list)
    thinking = models.JSONField(null=True, blank=True)
    sampling = models.BooleanField(default=True)
    enabled = models.BooleanField(default=True)
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["model_id"]

    def __str__(self) -> str:
        return self.model_id


class TenantJudgePolicy(models.Model):
    """Which registered judge models a tenant's evaluations may use; `allowed_models` None: all.

    A tenant without a row may use every enabled registration.
    """

    tenant = models.OneToOneField("tenancy.Tenant", on_delete=models.CASCADE, related_name="judge_policy")
    allowed_models = models.JSONField(null=True, blank=True)
    updated_at = models.DateTimeField(default=timezone.now)

    class Meta:
        verbose_name_plural = "tenant judge policies"

    def __str__(self) -> str:
        return f"judge policy of {self.tenant_id}"


class JudgeClaim(models.Model):
    """An evaluation judging a cache key right now: others judging the same key wait for its
    cached answer instead of paying for the same call (see ConsoleJudgeServices.claim).

    A row, so that the claim holds across processes and machines; it lapses at `expires_at`
    (the holder's deadline), should the holder die before releasing it.
    """

    key = models.CharField(max_length=64, unique=True)
    holder = models.CharField(max_length=32)
    expires_at = models.DateTimeField()

    def __str__(self) -> str:
        return f"claim {self.key[:12]} until {self.expires_at:%H:%M:%S}"


class JudgeCacheEntry(models.Model):
    """A judge's outcome kept under its cache key (guardrail revision, trace content, model),
    so that judging the same trace again does not pay again."""

    key = models.CharField(max_length=64, unique=True)
    outcome = models.JSONField()
    model_id = models.CharField(max_length=100)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        verbose_name_plural = "judge cache entries"

    def __str__(self) -> str:
        return f"{self.model_id} {self.key[:12]}"
