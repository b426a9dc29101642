"""Tenants, the users' memberships in them and the API keys that act for them."""

from __future__ import annotations

import hashlib
import secrets
from decimal import Decimal
from typing import TYPE_CHECKING

from django.conf import settings
from django.core.validators import RegexValidator
from django.db import DEFAULT_DB_ALIAS, models
from django.utils import timezone

if TYPE_CHECKING:
    from django.contrib.auth.models import User

#: Roles in the order of what they allow: each one allows what the earlier ones do.
ROLES = ("reviewer", "author", "admin")
#: What an API key may be allowed to do.
SCOPES = ("ingest", "evaluate", "read", "review", "author", "audit")
#: Scopes of the console's operator, only for a key bound to no tenant (made with
#: `create_api_key`, never on a tenant's pages): `metrics` reads /metrics.
OPERATOR_SCOPES = ("metrics",)
#: The role a user needs for what a key needs the scope of the same name for. `review`
#: (moving violations through their review states) is what a reviewer is for; a key needs
#: the scope explicitly, `read` alone does not allow it.
ROLE_FOR_SCOPE = {
    "read": "reviewer",
    "review": "reviewer",
    "run": "reviewer",
    "ingest": "author",
    "evaluate": "author",
    "author": "author",
    "audit": "admin",  # reading the audit log
}
#: Capabilities of people that a key has through another scope: starting evaluation runs
#: and previews (`run`) is a reviewer's for people, the `evaluate` scope's for keys.
KEY_SCOPE_FOR = {"run": "evaluate"}


def key_scope(scope: str) -> str:
    """The key scope that allows the capability `scope`."""
    return KEY_SCOPE_FOR.get(scope, scope)


KEY_PREFIX = "kgi_"
#: How often a key's last-used time is written at most: every request would be a write.
LAST_USED_RESOLUTION_SECONDS = 60


def roles_at_least(role: str) -> list[str]:
    """The roles that allow at least what `role` allows."""
    return list(ROLES[ROLES.index(role) :])


class Tenant(models.Model):
    """An organisation whose traces, results, violations and ledger are kept apart."""

    slug = models.SlugField(max_length=100, unique=True)
    name = models.CharField(max_length=200, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    reviewer_judge_limit_usd = models.DecimalField(
        max_digits=12,
        decimal_places=4,
        default=Decimal("1.00"),
        help_text="a reviewer starts a run or preview whose judge cost estimate is at most this; "
        "above it, an author does",
    )

    class Meta:
        ordering = ["slug"]

    def __str__(self) -> str:
        return self.slug


class Membership(models.Model):
    """A user's role in a tenant: reviewer reads, author also writes, admin also manages."""

    class Role(models.TextChoices):
        REVIEWER = "reviewer"
        AUTHOR = "author"
        ADMIN = "admin"

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships")
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="memberships")
    role = models.CharField(max_length=20, choices=Role.choices, default=Role.REVIEWER)
    sso = models.BooleanField(
        default=False,
        help_text="granted by single sign-on's group mapping, which changes or removes it at each sign-in; "
        "a membership granted by hand is never touched by it",
    )

    class Meta:
        constraints = [models.UniqueConstraint(fields=["user", "tenant"], name="membership_user_tenant")]

    def __str__(self) -> str:
        return f"{self.user} in {self.tenant} ({self.role})"


class SSOIdentity(models.Model):
    """The account an OpenID Connect subject signs in to: the provider's `sub`, never the e-mail,
    which the person may be able to change at the provider."""

    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="sso_identity")
    issuer = models.CharField(max_length=300)
    subject = models.CharField(max_length=255)
    created_at = models.DateTimeField(default=timezone.now)
    last_sign_in_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        verbose_name = "single sign-on identity"
        constraints = [models.UniqueConstraint(fields=["issuer", "subject"], name="sso_identity_issuer_subject")]

    def __str__(self) -> str:
        return f"{self.user} ({self.issuer} {self.subject})"


class ApiKeyQuerySet(models.QuerySet["ApiKey"]):
    def active(self) -> ApiKeyQuerySet:
        return self.filter(revoked_at__isnull=True)


def hash_key(key: str) -> str:
    """The stored form of a key: keys are random, so a plain sha256 cannot be reversed."""
    return hashlib.sha256(key.encode()).hexdigest()


class ApiKey(models.Model):
    """A credential for runtimes and CI: only its hash is stored, the key is shown once.

    A key bound to a tenant acts only on that tenant; a key bound to none may read and
    author guardrails but never ingests.
    """

    prefix = models.CharField(max_length=16, db_index=True)
    hash = models.CharField(max_length=64, unique=True)
    name = models.CharField(max_length=200, blank=True)
    scopes = models.JSONField(default=list)
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, null=True, blank=True, related_name="api_keys")
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)
    runtime_rate = models.CharField(
        max_length=32,
        blank=True,
        validators=[RegexValidator(r"^[1-9][0-9]*/(second|minute|hour|day)$", "N/second, /minute, /hour or /day")],
        help_text="this key's limit on POST evaluate and ingestion (N/second|minute|hour|day); "
        "empty: KINDGI_RUNTIME_RATE",
    )

    objects = ApiKeyQuerySet.as_manager()

    class Meta:
        verbose_name = "API key"

    def __str__(self) -> str:
        return f"{self.prefix}… ({self.name or ', '.join(self.scopes)})"

    @classmethod
    def issue(
        cls, *, scopes: list[str], tenant: Tenant | None = None, name: str = "", created_by: User | None = None
    ) -> tuple[ApiKey, str]:
        """Create a key and return it with its secret, which is not kept anywhere."""
        secret = KEY_PREFIX + secrets.token_urlsafe(32)
        key = cls.objects.create(
            prefix=secret[:12],
            hash=hash_key(secret),
            name=name,
            scopes=sorted(set(scopes)),
            tenant=tenant,
            created_by=created_by,
        )
        return key, secret

    @property
    def label(self) -> str:
        """How the key is named in revisions and logs (never the secret)."""
        return f"key:{self.prefix}"

    @property
    def revoked(self) -> bool:
        return self.revoked_at is not None

    def revoke(self) -> None:
        self.revoked_at = timezone.now()
        self.save(update_fields=["revoked_at"])

    def touch(self) -> None:
        """Record a use, at most once a minute so that reading is not a write each time."""
        now = timezone.now()
        last = self.last_used_at
        if last is None or (now - last).total_seconds() >= LAST_USED_RESOLUTION_SECONDS:
            # (on the primary by name: bookkeeping, which leaves the request's reads on a
            # read replica, where a write routed by kindgi_console.replicas would not)
            ApiKey.objects.using(DEFAULT_DB_ALIAS).filter(pk=self.pk).update(last_used_at=now)
            self.last_used_at = now


class IdempotencyRecord(models.Model):
    """The answer given to a request that started work, under its `Idempotency-Key`.

    The same caller sending the same key and body again gets this answer again, and no
    second run. The row is written in the transaction of the work it records, so that a
    retry of a request that failed before committing starts the work afresh.
    """

    owner = models.CharField(max_length=100, help_text="the caller: key:<pk> or user:<pk>")
    key = models.CharField(max_length=255)
    fingerprint = models.CharField(max_length=64, help_text="sha256 of method, path and body")
    status_code = models.PositiveSmallIntegerField(null=True, blank=True)
    content = models.TextField(blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["owner", "key"], name="idempotency_owner_key")]

    def __str__(self) -> str:
        return f"{self.owner} {self.key}"
