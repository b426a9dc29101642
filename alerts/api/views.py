"""`/api/v1/alert-rules`, `alert-channels` and `alert-firings`: a tenant's alerting.

Reading needs the `read` scope or permission, writing the `author` one in the rule's
tenant (a tenant-bound key writes its own tenant; a user names it with `tenant`). Another
tenant's rule, channel or firing is a 404, for reads and writes alike.
"""

from __future__ import annotations

from typing import Any, cast

from django.db.models import Prefetch, QuerySet
from django.http import Http404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import status
from rest_framework.generics import GenericAPIView
from rest_framework.request import Request
from rest_framework.response import Response

from alerts import services
from alerts.models import AlertRule, Channel, Delivery, DeliveryAttempt, Firing
from alerts.serialize import channel_json, firing_json, rule_json
from guardrails.engine.types import Issue
from kindgi_console.api import ApiError, ConsoleAPIView, read_json_body
from kindgi_console.openapi import error_responses
from kindgi_console.tenancy.scoping import TenantScopedQuerySet

OBJECT = OpenApiResponse(OpenApiTypes.OBJECT)
PARAMS_DESCRIPTION = (
    "By kind. violations: guardrail, severity, action, windowDays (1-31), threshold and/or factor, "
    "minCount. spend: amountUsd and/or overBudgetCalls, period (day, month), guardrail. precision: "
    "guardrail (required, one the tenant sees), threshold (required, above 0 and at most 1: fires when "
    "1 - false positives / reviewed falls under it), minReviewed (10: reviews needed before it may "
    "fire), windowDays (1-366, 30). queue_size: queue (required: a review queue, the escalateTo of an "
    "escalate guardrail), threshold (required: fires over this many open violations in it). queue_age: "
    "queue (required), maxAgeMinutes (required: fires when its oldest open violation that nobody "
    "claimed waits longer). run_failed, upload_failed: none."
)
RULE_FIELDS: dict[str, Any] = {
    "tenant": {"type": "string", "description": "The tenant's slug (a tenant-bound key writes its own)."},
    "name": {"type": "string", "minLength": 1, "maxLength": 200},
    "kind": {"type": "string", "enum": list(AlertRule.Kind.values)},
    "params": {"type": "object", "description": PARAMS_DESCRIPTION},
    "channels": {
        "type": "array",
        "items": {"type": "integer"},
        "maxItems": services.MAX_CHANNELS_PER_RULE,
        "description": "Ids of the tenant's channels.",
    },
    "enabled": {"type": "boolean", "default": True},
}
RULE_BODY = {"application/json": {"type": "object", "required": ["name", "kind"], "properties": RULE_FIELDS}}
RULE = OpenApiResponse(
    {
        "type": "object",
        "properties": {
            "id": {"type": "integer"},
            **RULE_FIELDS,
            "createdBy": {"type": "string"},
            "createdAt": {"type": "string", "format": "date-time"},
            "updatedAt": {"type": "string", "format": "date-time"},
        },
    }
)
READ_ERRORS = error_responses(400, 401, 403)
WRITE_ERRORS = error_responses(400, 401, 403, 404, 413, 415)


class TenantObjectView(ConsoleAPIView):
    """Lists, reads and writes one kind of tenant object, scoped by `for_caller`."""

    filter_backends: list[Any] = []
    scopes = {"GET": "read", "POST": "author", "PUT": "author", "DELETE": "author"}

    def body(self) -> dict[str, Any]:
        body = read_json_body(self.request)
        if not isinstance(body, dict):
            raise ApiError([Issue("", "the body is a JSON object")])
        return body

    @staticmethod
    def tenant_slug(body: dict[str, Any]) -> str | None:
        """The tenant a body names; a 400 for anything but a slug (or nothing)."""
        slug = body.get("tenant")
        if slug is not None and (not isinstance(slug, str) or "\x00" in slug or len(slug) > 100):
            raise ApiError([Issue("/tenant", "tenant is a tenant's slug")])
        return slug

    def writable(self) -> QuerySet[Any]:
        """What the caller may change: the `author` scope's tenants only."""
        rows = cast(TenantScopedQuerySet[Any], GenericAPIView.get_queryset(self))
        return rows.for_caller(self.caller, "author")

    def one(self, pk: int, *, write: bool = False) -> Any:
        rows = self.writable() if write else self.get_queryset()
        found = rows.filter(pk=pk).first()
        if found is None:
            raise Http404
        return found


class AlertRuleListView(TenantObjectView):
    """`GET alert-rules` lists the caller's tenants' rules; `POST alert-rules` creates one."""

    queryset = AlertRule.objects.select_related("tenant").prefetch_related("channels")

    @extend_schema(operation_id="alert_rules_list", responses={200: OBJECT, **READ_ERRORS})
    def get(self, request: Request) -> Response:
        page = self.paginate_queryset(self.get_queryset()) or []
        return self.get_paginated_response([rule_json(rule) for rule in page])

    @extend_schema(operation_id="alert_rules_create", request=RULE_BODY, responses={201: RULE, **WRITE_ERRORS})
    def post(self, request: Request) -> Response:
        body = self.body()
        tenant = self.caller.tenant_for_write(self.tenant_slug(body), "author")
        rule = services.save_rule(tenant, services.check_rule(body, tenant).valid_fields(), self.caller)
        return Response(rule_json(rule), status=status.HTTP_201_CREATED)


class AlertRuleDetailView(TenantObjectView):
    """`GET`, `PUT`, `DELETE alert-rules/{id}`."""

    queryset = AlertRule.objects.select_related("tenant").prefetch_related("channels")

    @extend_schema(operation_id="alert_rules_read", responses={200: RULE, **error_responses(401, 403, 404)})
    def get(self, request: Request, pk: int) -> Response:
        return Response(rule_json(self.one(pk)))

    @extend_schema(operation_id="alert_rules_replace", request=RULE_BODY, responses={200: RULE, **WRITE_ERRORS})
    def put(self, request: Request, pk: int) -> Response:
        rule = self.one(pk, write=True)
        fields = services.check_rule(self.body(), rule.tenant, rule).valid_fields()
        rule = services.save_rule(rule.tenant, fields, self.caller, rule)
        return Response(rule_json(rule))

    @extend_schema(operation_id="alert_rules_delete", responses={204: None, **error_responses(401, 403, 404)})
    def delete(self, request: Request, pk: int) -> Response:
        services.delete_rule(self.one(pk, write=True), self.caller)
        return Response(status=status.HTTP_204_NO_CONTENT)


class ChannelListView(TenantObjectView):
    """`GET alert-channels`; `POST alert-channels` creates one and shows its secret once."""

    queryset = Channel.objects.select_related("tenant")

    @extend_schema(operation_id="alert_channels_list", responses={200: OBJECT, **READ_ERRORS})
    def get(self, request: Request) -> Response:
        page = self.paginate_queryset(self.get_queryset()) or []
        writable = set(self.writable().filter(pk__in=[c.pk for c in page]).values_list("pk", flat=True))
        return self.get_paginated_response([channel_json(c, full_url=c.pk in writable) for c in page])

    @extend_schema(
        operation_id="alert_channels_create", request=OpenApiTypes.OBJECT, responses={201: OBJECT, **WRITE_ERRORS}
    )
    def post(self, request: Request) -> Response:
        body = self.body()
        tenant = self.caller.tenant_for_write(self.tenant_slug(body), "author")
        channel = services.save_channel(tenant, services.check_channel(body, tenant).valid_fields(), self.caller)
        return Response(channel_json(channel, with_secret=True), status=status.HTTP_201_CREATED)


class ChannelDetailView(TenantObjectView):
    """`GET`, `PUT`, `DELETE alert-channels/{id}` (the secret is kept on PUT)."""

    queryset = Channel.objects.select_related("tenant")

    @extend_schema(operation_id="alert_channels_read", responses={200: OBJECT, **error_responses(401, 403, 404)})
    def get(self, request: Request, pk: int) -> Response:
        return Response(channel_json(self.one(pk), full_url=self.writable().filter(pk=pk).exists()))

    @extend_schema(
        operation_id="alert_channels_replace", request=OpenApiTypes.OBJECT, responses={200: OBJECT, **WRITE_ERRORS}
    )
    def put(self, request: Request, pk: int) -> Response:
        channel = self.one(pk, write=True)
        fields = services.check_channel(self.body(), channel.tenant, channel).valid_fields()
        return Response(channel_json(services.save_channel(channel.tenant, fields, self.caller, channel)))

    @extend_schema(operation_id="alert_channels_delete", responses={204: None, **error_responses(401, 403, 404)})
    def delete(self, request: Request, pk: int) -> Response:
        services.delete_channel(self.one(pk, write=True), self.caller)
        return Response(status=status.HTTP_204_NO_CONTENT)


def firings() -> QuerySet[Firing]:
    attempts = Prefetch("attempt_log", queryset=DeliveryAttempt.objects.order_by("number"))
    deliveries = Prefetch("deliveries", queryset=Delivery.objects.order_by("pk").prefetch_related(attempts))
    return Firing.objects.select_related("tenant").prefetch_related(deliveries)


class FiringListView(TenantObjectView):
    """`GET alert-firings` (filter `rule`): each firing with its deliveries and their attempts."""

    queryset = firings()
    ordering_field = "fired_at"

    @extend_schema(operation_id="alert_firings_list", responses={200: OBJECT, **READ_ERRORS})
    def get(self, request: Request) -> Response:
        rows = self.get_queryset()
        rule = request.query_params.get("rule")
        if rule is not None:
            if not rule.isdigit():
                raise ApiError([Issue("/rule", "rule is a rule id")])
            rows = rows.filter(rule_id=int(rule))
        page = self.paginate_queryset(rows) or []
        return self.get_paginated_response([firing_json(f, deliveries=True) for f in page])


class FiringDetailView(TenantObjectView):
    """`GET alert-firings/{id}`: what the firing saw, and the log of each delivery."""

    queryset = firings()

    @extend_schema(operation_id="alert_firings_read", responses={200: OBJECT, **error_responses(401, 403, 404)})
    def get(self, request: Request, pk: int) -> Response:
        return Response(firing_json(self.one(pk), deliveries=True))
