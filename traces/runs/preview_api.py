"""`POST guardrails/preview` and `GET guardrails/previews/{id}`: an edit's impact before it ships.

The draft and the selection are checked at once (400 naming the field); the preview is then
evaluated by a worker and read like a run: status, progress, and what changed.
"""

from __future__ import annotations

from typing import Any

from django.shortcuts import get_object_or_404
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework.request import Request
from rest_framework.response import Response

from guardrails.engine.types import Issue
from kindgi_console import idempotency
from kindgi_console.api import ApiError, ConsoleAPIView, body_tenant, caller_authors, object_body, read_json_body
from traces.ingest.serializers import ERRORS
from traces.models import GuardrailPreview
from traces.runs import previews
from traces.runs.api import EvaluationEstimateView
from traces.runs.serializers import ESTIMATE_SCHEMA

_FIGURE = {
    "type": "object",
    "properties": {
        "value": {"type": "number", "nullable": True},
        "interval": {"type": "array", "items": {"type": "number"}, "nullable": True},
    },
}
_CONFUSION = {
    "type": "object",
    "properties": {
        **{
            name: {"type": "integer"}
            for name in ("labelled", "wrong", "truePositives", "falsePositives", "falseNegatives", "trueNegatives")
        },
        "errors": {"type": "integer"},
        "precision": _FIGURE,
        "recall": _FIGURE,
    },
}
LABELLED_SET_SCHEMA = {
    "type": "object",
    "nullable": True,
    "description": "The draft and the revision it is compared with on the guardrail's labelled set "
    "(calibration labels and reviewed violations of the tenant; the newest `limit` of `total`); "
    "null for a preview made before labelled sets were measured.",
    "properties": {
        "total": {"type": "integer"},
        "evaluated": {"type": "integer"},
        "limit": {"type": "integer"},
        "capped": {"type": "boolean"},
        "draft": _CONFUSION,
        "current": {**_CONFUSION, "nullable": True},
        "newlyWrong": {"type": "integer"},
        "noLongerWrong": {"type": "integer"},
        "wrong": {"type": "array", "items": {"type": "object"}},
        "listed": {"type": "integer"},
    },
}
PREVIEW_SCHEMA = OpenApiResponse(
    {
        "type": "object",
        "properties": {
            "id": {"type": "integer"},
            "url": {"type": "string"},
            "page": {"type": "string"},
            "tenant": {"type": "string"},
            "guardrail": {"type": "string"},
            "currentRevision": {"type": "integer", "nullable": True},
            "status": {"type": "string", "enum": [s.value for s in GuardrailPreview.Status]},
            "mode": {"type": "string"},
            "traces": {"type": "object"},
            "progress": {"type": "object"},
            "counts": {
                "type": "object",
                "properties": {name: {"type": "integer"} for name in ("newlyFailing", "noLongerFailing", "unchanged")},
            },
            "newlyFailing": {"type": "array", "items": {"type": "object"}},
            "noLongerFailing": {"type": "array", "items": {"type": "object"}},
            "labelledSet": LABELLED_SET_SCHEMA,
            "judgeEstimateUsd": {"type": "string", "nullable": True},
            "judgeCostUsd": {"type": "string"},
            "error": {"type": "string"},
            "createdAt": {"type": "string", "format": "date-time"},
        },
    }
)
START_BODY = {
    "application/json": {
        "type": "object",
        "required": ["guardrail"],
        "additionalProperties": False,
        "properties": {
            "guardrail": {"type": "object", "description": "The unsaved draft, in the wire format of schema 1.1.0."},
            "traces": {
                "type": "object",
                "description": "The selection, as a run's filters (agent, flow, since, until, "
                f"upload); without since, the last {previews.PREVIEW_DAYS} days; at most {previews.PREVIEW_MAX}.",
            },
            "tenant": {"type": "string"},
            "mode": {"type": "string", "enum": ["ci", "runtime"], "default": "ci"},
        },
    }
}
FIELDS = {"guardrail", "traces", "tenant", "mode"}


class PreviewStartView(ConsoleAPIView):
    """`POST guardrails/preview`: 202 and the preview to read; reviewers may start one."""

    queryset = GuardrailPreview.objects.all()
    scopes = {"POST": "run"}
    filter_backends: list[Any] = []

    @extend_schema(
        operation_id="guardrails_preview",
        request=START_BODY,
        parameters=[idempotency.PARAMETER],
        responses={202: PREVIEW_SCHEMA, 400: ERRORS, 403: ERRORS, 422: ERRORS},
    )
    @idempotency.idempotent
    def post(self, request: Request) -> Response:
        body = object_body(read_json_body(request), FIELDS, "the body is an object: {guardrail, traces}")
        tenant = body_tenant(body)
        preview = previews.create_preview(
            previews.PreviewRequest(
                tenant=self.caller.tenant_for_write(tenant, "run"),
                draft=body.get("guardrail"),
                filters=body.get("traces"),
                mode=body.get("mode", "ci"),
                started_by=self.caller.user_or_none,
                label=self.caller.label,
                by_author=caller_authors(self.caller, tenant),
            )
        )
        preview = GuardrailPreview.objects.select_related("tenant", "current").get(pk=preview.pk)
        return Response(previews.preview_as_dict(preview), status=202)


ESTIMATE_BODY = {
    "application/json": {
        **START_BODY["application/json"],
        "description": "The draft and the selection a preview would take (nothing is started).",
    }
}


class PreviewEstimateView(ConsoleAPIView):
    """`POST guardrails/preview/estimate`: what Preview impact and Try it of a draft would ask
    judges (calls, cache hits, dollars at most), before either runs; starts nothing."""

    queryset = GuardrailPreview.objects.all()
    scopes = {"POST": "read"}
    filter_backends: list[Any] = []

    @extend_schema(
        operation_id="guardrails_preview_estimate",
        request=ESTIMATE_BODY,
        responses={
            200: OpenApiResponse(
                {
                    "type": "object",
                    "properties": {"tenant": {"type": "string"}, "preview": ESTIMATE_SCHEMA, "try": ESTIMATE_SCHEMA},
                }
            ),
            400: ERRORS,
            404: ERRORS,
        },
    )
    def post(self, request: Request) -> Response:
        body = object_body(read_json_body(request), FIELDS, "the body is an object: {guardrail, traces}")
        tenant = EvaluationEstimateView.tenant_of(self.caller, body_tenant(body))
        mode = body.get("mode", "ci")
        if mode not in ("ci", "runtime"):
            raise ApiError([Issue("/mode", "mode is ci or runtime")])
        return Response(previews.draft_estimate(tenant, body.get("guardrail"), body.get("traces"), mode))


class PreviewDetailView(ConsoleAPIView):
    """`GET guardrails/previews/{id}`: status, progress, and what changed."""

    queryset = GuardrailPreview.objects.select_related("tenant", "current")
    filter_backends: list[Any] = []

    @extend_schema(operation_id="guardrails_preview_read", responses={200: PREVIEW_SCHEMA, 404: ERRORS})
    def get(self, request: Request, pk: int) -> Response:
        return Response(previews.preview_as_dict(get_object_or_404(self.get_queryset(), pk=pk)))
