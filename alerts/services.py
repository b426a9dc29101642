"""Rules and channels as the API and the pages write them: checked, saved, audited.

`check_rule` and `check_channel` turn a submitted object into clean fields or `Issue`s
with JSON pointers; the `save_*` and `delete_*` functions write in one transaction with
their audit entry.
"""

from __future__ import annotations

import base64
import secrets
from dataclasses import dataclass, field
from typing import Any

from django.core.exceptions import ValidationError
from django.core.validators import EmailValidator, URLValidator
from django.db import transaction
from django.db.models import QuerySet
from django.utils import timezone

from alerts.models import AlertRule, Channel
from alerts.rules import validate_params
from guardrails.engine.types import Issue, IssuesError
from guardrails.models import Guardrail
from kindgi_console.audit import log as audit
from kindgi_console.tenancy.models import Tenant

MAX_CHANNELS_PER_RULE = 20
MAX_EMAILS = 20


@dataclass
class Checked:
    """A submitted object's clean fields, or what is wrong with it."""

    fields: dict[str, Any] = field(default_factory=dict)
    issues: list[Issue] = field(default_factory=list)

    def valid_fields(self) -> dict[str, Any]:
        """The clean fields; IssuesError (400, each issue at its field) when something is wrong."""
        if self.issues:
            raise IssuesError(self.issues)
        return self.fields


MAX_PK = 2**63 - 1


def nul_issues(value: object, path: str = "") -> list[Issue]:
    """The NUL characters of a JSON value (PostgreSQL cannot store them), by pointer."""
    if isinstance(value, str):
        return [Issue(path, "the NUL character is not allowed")] if "\x00" in value else []
    if isinstance(value, dict):
        return [
            issue
            for key, item in value.items()
            for issue in (nul_issues(key, path) + nul_issues(item, f"{path}/{key}"))
        ]
    if isinstance(value, list):
        return [issue for index, item in enumerate(value) for issue in nul_issues(item, f"{path}/{index}")]
    return []


def _common(body: object, what: str) -> Checked | None:
    """The checks every submitted object gets first; an answer when it already fails."""
    if not isinstance(body, dict):
        return Checked(issues=[Issue("", f"{what} is a JSON object")])
    issues = nul_issues(body)
    tenant = body.get("tenant")
    if tenant is not None and not isinstance(tenant, str):
        issues.append(Issue("/tenant", "tenant is a tenant's slug"))
    return Checked(issues=issues) if issues else None


def _name(body: dict[str, Any], checked: Checked, taken: QuerySet[Any]) -> None:
    """A name of 1 to 200 characters that no other row of `taken` (the tenant's) has."""
    name = body.get("name")
    if not isinstance(name, str) or not 1 <= len(name.strip()) <= 200:
        checked.issues.append(Issue("/name", "name is a text of 1 to 200 characters"))
    elif taken.filter(name=name.strip()).exists():
        checked.issues.append(
            Issue("/name", f"another {taken.model._meta.verbose_name} has the name {name.strip()!r}: choose another")
        )
    else:
        checked.fields["name"] = name.strip()


def _others(model: Any, tenant: Tenant, current: Any) -> QuerySet[Any]:
    rows: QuerySet[Any] = model.objects.filter(tenant=tenant)
    return rows.exclude(pk=current.pk) if current is not None else rows


def _enabled(body: dict[str, Any], checked: Checked) -> None:
    enabled = body.get("enabled", True)
    if not isinstance(enabled, bool):
        checked.issues.append(Issue("/enabled", "enabled is true or false"))
    else:
        checked.fields["enabled"] = enabled


def check_rule(body: object, tenant: Tenant, current: AlertRule | None = None) -> Checked:
    """A rule's `name` (unique in the tenant), `kind`, `params`, `channels` (ids of the
    tenant's) and `enabled`; `current` is the rule being replaced, if any."""
    failed = _common(body, "a rule")
    if failed is not None or not isinstance(body, dict):
        return failed or Checked()
    checked = Checked()
    _name(body, checked, _others(AlertRule, tenant, current))
    _enabled(body, checked)
    kind, params = body.get("kind"), body.get("params", {})
    issues = validate_params(str(kind), params)
    checked.issues.extend(issues)
    if not issues and kind == AlertRule.Kind.PRECISION:
        issues = _guardrail_issues(params["guardrail"], tenant)
        checked.issues.extend(issues)
    if not issues:
        checked.fields.update(kind=kind, params=params)
    channels = body.get("channels", [])
    if (
        not isinstance(channels, list)
        or len(channels) > MAX_CHANNELS_PER_RULE
        or not all(isinstance(pk, int) and not isinstance(pk, bool) and 0 < pk <= MAX_PK for pk in channels)
    ):
        checked.issues.append(Issue("/channels", f"channels is a list of at most {MAX_CHANNELS_PER_RULE} channel ids"))
        return checked
    found = list(Channel.objects.filter(tenant=tenant, pk__in=channels))
    missing = sorted(set(channels) - {c.pk for c in found})
    if missing:
        index = channels.index(missing[0])
        checked.issues.append(Issue(f"/channels/{index}", f"there is no channel {missing[0]} in {tenant.slug}"))
    checked.fields["channels"] = found
    return checked


def _guardrail_issues(guardrail_id: str, tenant: Tenant) -> list[Issue]:
    """A precision rule watches a live guardrail that applies to its tenant (its own or a
    console-wide one); another tenant's is answered as one that does not exist."""
    if Guardrail.objects.live().applying_to(tenant.pk).filter(guardrail_id=guardrail_id).exists():
        return []
    return [Issue("/params/guardrail", f"there is no guardrail {guardrail_id!r} in {tenant.slug}")]


def check_channel(body: object, tenant: Tenant, current: Channel | None = None) -> Checked:
    """A channel's `name` (unique in the tenant), `kind`, `url` (webhook, slack) or `emails`
    (email) and `enabled`; `current` is the channel being replaced, if any."""
    failed = _common(body, "a channel")
    if failed is not None or not isinstance(body, dict):
        return failed or Checked()
    checked = Checked()
    _name(body, checked, _others(Channel, tenant, current))
    _enabled(body, checked)
    kind = body.get("kind")
    if kind not in Channel.Kind.values:
        checked.issues.append(Issue("/kind", f"kind is one of {', '.join(Channel.Kind.values)}"))
    elif kind == Channel.Kind.EMAIL:
        _emails(body.get("emails"), checked)
    else:
        _url(body.get("url"), checked)
    checked.fields["kind"] = kind
    return checked


def _url(url: object, checked: Checked) -> None:
    try:
        if not isinstance(url, str) or len(url) > 2000:
            raise ValidationError("bad")
        URLValidator(schemes=["http", "https"])(url)
    except ValidationError:
        checked.issues.append(Issue("/url", "url is an http or https address of at most 2000 characters"))
        return
    checked.fields.update(url=url, emails=[])


def _emails(emails: object, checked: Checked) -> None:
    if not isinstance(emails, list) or not 1 <= len(emails) <= MAX_EMAILS:
        checked.issues.append(Issue("/emails", f"emails is a list of 1 to {MAX_EMAILS} addresses"))
        return
    for index, email in enumerate(emails):
        try:
            if not isinstance(email, str) or len(email) > 254:
                raise ValidationError("bad")
            EmailValidator()(email)
        except ValidationError:
            checked.issues.append(Issue(f"/emails/{index}", "this is not an e-mail address"))
    checked.fields.update(emails=emails, url="")


def rule_state(rule: AlertRule) -> dict[str, Any]:
    """A rule's fields as the audit log compares them."""
    return {
        "name": rule.name,
        "kind": rule.kind,
        "params": rule.params,
        "enabled": rule.enabled,
        "channels": sorted(c.pk for c in rule.channels.all()) if rule.pk else [],
    }


def channel_state(channel: Channel) -> dict[str, Any]:
    return {
        "name": channel.name,
        "kind": channel.kind,
        "url": channel.url,
        "emails": channel.emails,
        "enabled": channel.enabled,
        "secret": channel.secret,
    }


@transaction.atomic
def save_rule(tenant: Tenant, fields: dict[str, Any], actor: object, rule: AlertRule | None = None) -> AlertRule:
    """Create (no `rule`) or replace a rule with checked fields; audited."""
    before = rule_state(rule) if rule else None
    rule = rule or AlertRule(tenant=tenant, created_by=audit.actor_of(actor).label)
    channels = fields.pop("channels", None)
    for name, value in fields.items():
        setattr(rule, name, value)
    rule.updated_at = timezone.now()
    rule.save()
    if channels is not None:
        rule.channels.set(channels)
    audit.record(
        "alertrule.update" if before else "alertrule.create", rule, before=before, after=rule_state(rule), actor=actor
    )
    return rule


@transaction.atomic
def delete_rule(rule: AlertRule, actor: object) -> None:
    audit.record("alertrule.delete", rule, before=rule_state(rule), actor=actor)
    rule.delete()


def new_secret() -> str:
    """A Standard Webhooks signing secret: `whsec_` and 32 random bytes in base64."""
    return "whsec_" + base64.b64encode(secrets.token_bytes(32)).decode()


@transaction.atomic
def save_channel(tenant: Tenant, fields: dict[str, Any], actor: object, channel: Channel | None = None) -> Channel:
    """Create (with a new secret) or replace a channel; audited, its secret only as changed."""
    before = channel_state(channel) if channel else None
    channel = channel or Channel(tenant=tenant, secret=new_secret())
    for name, value in fields.items():
        setattr(channel, name, value)
    channel.save()
    audit.record(
        "channel.update" if before else "channel.create",
        channel,
        before=before,
        after=channel_state(channel),
        actor=actor,
    )
    return channel


@transaction.atomic
def delete_channel(channel: Channel, actor: object) -> None:
    audit.record("channel.delete", channel, before=channel_state(channel), actor=actor)
    channel.delete()
