"""The alerts pages of the current tenant: rules, channels, firings and their delivery log.

Everyone who reads the tenant sees them; its authors and admins write them. Another
tenant's rule, channel or firing is a 404, for reads and writes alike.
"""

from __future__ import annotations

import json
from typing import Any

from django.contrib import messages
from django.contrib.auth.mixins import LoginRequiredMixin
from django.core.exceptions import PermissionDenied
from django.db.models import Prefetch, QuerySet
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from django.urls import reverse
from django.views import View

from alerts import delivery, services
from alerts.models import AlertRule, Channel, Delivery, DeliveryAttempt, Firing
from alerts.rules import PARAMS_SCHEMAS
from kindgi_console.tenancy.models import Tenant
from kindgi_console.tenancy.scoping import Caller, TenantDenied, current_rows, current_tenant

PARAMS_EXAMPLES = {
    "violations": {"severity": "critical", "windowDays": 1, "factor": 10, "minCount": 5},
    "spend": {"period": "month", "amountUsd": 50},
    "run_failed": {},
    "upload_failed": {},
    "precision": {"guardrail": "no-refund-promises", "threshold": 0.8, "minReviewed": 10, "windowDays": 30},
    "queue_size": {"queue": "support-leads", "threshold": 20},
    "queue_age": {"queue": "support-leads", "maxAgeMinutes": 240},
}
MAX_PARAMS_CHARS = 4000
MAX_FIELD_CHARS = 200
#: The label and one line of help of each parameter, on the rule form.
PARAM_LABELS = {
    "threshold": ("Threshold", "Fires above this many violations in the window (precision: under this, 0 to 1)."),
    "queue": ("Queue", "The review queue: the escalateTo of an escalate guardrail."),
    "maxAgeMinutes": ("Oldest waits at most (minutes)", "Fires when its oldest unclaimed open violation waits longer."),
    "windowDays": ("Window (days)", "The last N days, today included."),
    "factor": ("Factor", "Or fires over this many times the window just before."),
    "minCount": ("At least", "With the factor: fire only from this many violations."),
    "guardrail": ("Guardrail", "Only this guardrail's (its id); all when empty."),
    "severity": ("Severity", "Only violations of this severity."),
    "action": ("Action", "Only violations whose on-violation is this action."),
    "period": ("Period", "Today, or this calendar month."),
    "amountUsd": ("Amount (USD)", "Fires when judge spend goes over this amount."),
    "overBudgetCalls": ("Calls over budget", "Or fires on more than this many judge calls over their budget."),
    "minReviewed": ("Reviewed at least", "Fires only once this many of its violations were reviewed (10 by default)."),
}

#: A parameter's label and help where a kind means something else by it.
KIND_PARAM_LABELS = {("queue_size", "threshold"): ("Threshold", "Fires above this many open violations in the queue.")}


class AlertPageMixin(LoginRequiredMixin):
    """The current tenant's rows of a model, as the caller may read (or write) them."""

    request: HttpRequest

    @property
    def caller(self) -> Caller:
        return Caller(user=self.request.user)

    @property
    def tenant(self) -> Tenant:
        tenant = current_tenant(self.request)
        if tenant is None:
            raise Http404("no tenant")
        return tenant

    def rows(self, model: Any, scope: str = "read") -> QuerySet[Any]:
        """The current tenant's rows; 404 without a tenant, like every alerts page."""
        if current_tenant(self.request) is None:
            raise Http404("no tenant")
        rows: QuerySet[Any] = current_rows(self.request, model.objects, scope)
        return rows

    def may_write(self) -> bool:
        try:
            self.caller.tenant_for_write(self.tenant.slug, "author")
        except TenantDenied:
            return False
        return True

    def require_write(self) -> Tenant:
        if not self.may_write():
            raise PermissionDenied("only the tenant's authors and admins change alerts")
        return self.tenant


def param_fields(kind: str, params: Any) -> list[dict[str, Any]]:
    """The fields of a rule kind's parameters (from its params schema), holding `params`."""
    schema = PARAMS_SCHEMAS.get(kind, {})
    required = set(schema.get("required", []))
    values = params if isinstance(params, dict) else {}
    fields = []
    for name, prop in schema.get("properties", {}).items():
        label, help_text = KIND_PARAM_LABELS.get((kind, name)) or PARAM_LABELS.get(name, (name, ""))
        value = values.get(name, "")
        fields.append(
            {
                "name": name,
                "input": f"{kind}.{name}",
                "id": f"rule-{kind}-{name}",
                "label": label,
                "help": help_text,
                "choices": prop.get("enum"),
                "number": prop.get("type") in ("integer", "number"),
                "step": "1" if prop.get("type") == "integer" else "any",
                "required": name in required,
                "value": "" if value is None else str(value),
            }
        )
    return fields


def rule_kinds(current_kind: str, params: Any) -> list[dict[str, Any]]:
    """Each rule kind with its parameter fields; the current kind's hold `params`."""
    return [
        {"value": value, "label": label, "fields": param_fields(value, params if value == current_kind else {})}
        for value, label in AlertRule.Kind.choices
    ]


def _typed(raw: str, prop: dict[str, Any]) -> Any:
    """A field's text as its JSON type; text that is not a number stays text (the check names it)."""
    kind = prop.get("type")
    try:
        if kind == "integer":
            return int(raw)
        if kind == "number":
            number = float(raw)
            return int(number) if number.is_integer() and "." not in raw else number
    except ValueError:
        return raw
    return raw


def params_of(post: Any, kind: str) -> Any:
    """The rule's params: the raw JSON of `params` (the API's shape, still accepted), or the
    chosen kind's fields (`kind.name`, each bounded), empty ones left out."""
    if "params" in post:
        raw = post.get("params", "")[:MAX_PARAMS_CHARS] or "{}"
        try:
            return json.loads(raw)
        except ValueError:
            return raw  # reported as "/params: not an object" by the check
    params: dict[str, Any] = {}
    for name, prop in PARAMS_SCHEMAS.get(kind, {}).get("properties", {}).items():
        raw = post.get(f"{kind}.{name}", "")[:MAX_FIELD_CHARS].strip()
        if raw:
            params[name] = _typed(raw, prop)
    return params


def posted_channels(post: Any) -> set[int]:
    return {int(pk) for pk in post.getlist("channels")[:1000] if pk.isdigit()}


def rule_body(post: Any) -> dict[str, Any]:
    """The rule form as the API's JSON object."""
    kind = post.get("kind", "")
    params = params_of(post, kind)
    channels = sorted(posted_channels(post))
    return {
        "name": post.get("name", ""),
        "kind": kind,
        "params": params,
        "channels": channels,
        "enabled": post.get("enabled") == "on",
    }


def channel_body(post: Any) -> dict[str, Any]:
    emails = [e.strip() for e in post.get("emails", "")[:4000].split(",") if e.strip()]
    return {
        "name": post.get("name", ""),
        "kind": post.get("kind", ""),
        "url": post.get("url", ""),
        "emails": emails,
        "enabled": True,
    }


class AlertListView(AlertPageMixin, View):
    """Rules, channels and the latest firings; forms to add a rule or a channel."""

    template_name = "alerts/alert_list.html"

    def get(self, request: HttpRequest, **extra: Any) -> HttpResponse:
        context = {
            "rules": self.rows(AlertRule).prefetch_related("channels").order_by("name"),
            "channels": self.rows(Channel).order_by("name"),
            "firings": self.rows(Firing).select_related("rule").order_by("-fired_at", "-pk")[:50],
            "kinds": AlertRule.Kind.choices,
            "channel_kinds": Channel.Kind.choices,
            "examples": json.dumps(PARAMS_EXAMPLES),
            "schemas": PARAMS_SCHEMAS,
            "rule_kinds": self.form_kinds(extra.get("rule_form")),
            "chosen": posted_channels(extra["rule_form"]) if extra.get("rule_form") else set(),
            "may_write": self.may_write(),
            "nav_active": "alerts",
            **extra,
        }
        return render(request, self.template_name, context, status=400 if extra.get("issues") else 200)

    @staticmethod
    def form_kinds(posted: Any) -> list[dict[str, Any]]:
        """The new-rule form's kinds: empty (a violations example's shape), or as posted."""
        if posted is None:
            return rule_kinds("violations", {"severity": "critical", "windowDays": 1, "factor": 10, "minCount": 5})
        kind = posted.get("kind", "")
        return rule_kinds(kind, params_of(posted, kind))

    def post(self, request: HttpRequest) -> HttpResponse:
        tenant = self.require_write()
        action = request.POST.get("action")
        if action == "delete-channel":
            channel = self.rows(Channel, "author").filter(pk=_pk(request.POST.get("channel"))).first()
            if channel is None:
                raise Http404("no such channel")
            services.delete_channel(channel, self.caller)
            messages.success(request, f"Channel {channel.name} deleted.")
            return HttpResponseRedirect(reverse("alert-list"))
        if action == "add-channel":
            return self.add_channel(request, tenant)
        return self.add_rule(request, tenant)

    def add_rule(self, request: HttpRequest, tenant: Tenant) -> HttpResponse:
        body = rule_body(request.POST)
        checked = services.check_rule(body, tenant)
        if checked.issues:
            return self.get(request, issues=checked.issues, rule_form=request.POST)
        rule = services.save_rule(tenant, checked.fields, self.caller)
        messages.success(request, f"Rule {rule.name} created.")
        return HttpResponseRedirect(reverse("alert-list"))

    def add_channel(self, request: HttpRequest, tenant: Tenant) -> HttpResponse:
        checked = services.check_channel(channel_body(request.POST), tenant)
        if checked.issues:
            return self.get(request, issues=checked.issues, channel_form=request.POST)
        channel = services.save_channel(tenant, checked.fields, self.caller)
        return self.get(request, new_channel=channel)


def _pk(raw: str | None) -> int:
    return int(raw) if raw and raw.isdigit() else 0


class AlertRuleView(AlertPageMixin, View):
    """One rule: edit it, delete it, and its firings."""

    template_name = "alerts/rule_detail.html"

    def rule(self, pk: int, scope: str = "read") -> AlertRule:
        rule: AlertRule | None = self.rows(AlertRule, scope).prefetch_related("channels").filter(pk=pk).first()
        if rule is None:
            raise Http404("no such rule")
        return rule

    def get(self, request: HttpRequest, pk: int, **extra: Any) -> HttpResponse:
        rule = self.rule(pk)
        posted = extra.pop("rule_form", None)
        kind = posted.get("kind", "") if posted is not None else rule.kind
        context = {
            "rule": rule,
            "params": json.dumps(rule.params, indent=2),
            "rule_kind": kind,
            "form_name": posted.get("name", "") if posted is not None else rule.name,
            "form_enabled": posted.get("enabled") == "on" if posted is not None else rule.enabled,
            "rule_kinds": rule_kinds(kind, params_of(posted, kind) if posted is not None else rule.params),
            # After a refused save, the ticks the author made, not the stored ones.
            "rule_channels": posted_channels(posted) if posted is not None else {c.pk for c in rule.channels.all()},
            "channels": self.rows(Channel).order_by("name"),
            "kinds": AlertRule.Kind.choices,
            "firings": rule.firings.order_by("-fired_at", "-pk")[:50],
            "may_write": self.may_write(),
            "nav_active": "alerts",
            **extra,
        }
        return render(request, self.template_name, context, status=400 if extra.get("issues") else 200)

    def post(self, request: HttpRequest, pk: int) -> HttpResponse:
        rule = self.rule(pk, "author")
        tenant = self.require_write()
        if request.POST.get("action") == "delete":
            services.delete_rule(rule, self.caller)
            messages.success(request, f"Rule {rule.name} deleted.")
            return HttpResponseRedirect(reverse("alert-list"))
        checked = services.check_rule(rule_body(request.POST), tenant, rule)
        if checked.issues:
            return self.get(request, pk, issues=checked.issues, rule_form=request.POST)
        services.save_rule(tenant, checked.fields, self.caller, rule)
        messages.success(request, f"Rule {rule.name} saved.")
        return HttpResponseRedirect(reverse("alert-rule", args=[rule.pk]))


class ChannelTestView(AlertPageMixin, View):
    """`POST`: send a test message to one channel now, through the delivery path's own
    sending (signed webhook, Slack text, e-mail), and say what the receiver answered."""

    def post(self, request: HttpRequest, pk: int) -> HttpResponse:
        channel = self.rows(Channel, "author").filter(pk=pk).first()
        if channel is None:
            raise Http404("no such channel")
        self.require_write()
        answer = delivery.send_test(channel, self.request.user.get_username())
        status = f"HTTP {answer.status}: " if answer.status else ""
        if answer.ok:
            messages.success(request, f"Test sent to {channel.name}: {status}{answer.text or 'delivered'}".strip())
        else:
            messages.error(request, f"The test to {channel.name} failed: {status}{answer.text}".strip())
        return HttpResponseRedirect(reverse("alert-list") + "#channels-title")


class FiringView(AlertPageMixin, View):
    """One firing: what it saw, and each delivery with every attempt and its answer."""

    template_name = "alerts/firing_detail.html"

    def get(self, request: HttpRequest, pk: int) -> HttpResponse:
        attempts = Prefetch("attempt_log", queryset=DeliveryAttempt.objects.order_by("number"))
        deliveries = Prefetch(
            "deliveries", queryset=Delivery.objects.select_related("channel").order_by("pk").prefetch_related(attempts)
        )
        firing = self.rows(Firing).select_related("rule").prefetch_related(deliveries).filter(pk=pk).first()
        if firing is None:
            raise Http404("no such firing")
        context = {
            "firing": firing,
            "observed": json.dumps(firing.observed, indent=2),
            "resolved_observed": json.dumps(firing.resolved_observed, indent=2),
            "nav_active": "alerts",
        }
        return render(request, self.template_name, context)
