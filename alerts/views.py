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

from alerts import services
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
}
MAX_PARAMS_CHARS = 4000


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


def rule_body(post: Any) -> dict[str, Any]:
    """The rule form as the API's JSON object (params as JSON text, bounded)."""
    raw = post.get("params", "")[:MAX_PARAMS_CHARS] or "{}"
    try:
        params = json.loads(raw)
    except ValueError:
        params = raw  # reported as "/params: not an object" by the check
    channels = [int(pk) for pk in post.getlist("channels") if pk.isdigit()]
    return {
        "name": post.get("name", ""),
        "kind": post.get("kind", ""),
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
            "may_write": self.may_write(),
            "nav_active": "alerts",
            **extra,
        }
        return render(request, self.template_name, context, status=400 if extra.get("issues") else 200)

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
        context = {
            "rule": rule,
            "params": json.dumps(rule.params, indent=2),
            "rule_channels": {c.pk for c in rule.channels.all()},
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
            return self.get(request, pk, issues=checked.issues)
        services.save_rule(tenant, checked.fields, self.caller, rule)
        messages.success(request, f"Rule {rule.name} saved.")
        return HttpResponseRedirect(reverse("alert-rule", args=[rule.pk]))


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
