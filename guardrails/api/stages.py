"""REST endpoint of the stages of a turn at which a guardrail applies at runtime."""

from __future__ import annotations

from typing import Any

from django.http import Http404
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response

from guardrails.api.guardrails import GuardrailBaseView
from guardrails.engine.stages import STAGES, validate_stages
from guardrails.engine.types import Issue
from guardrails.models import Guardrail
from guardrails.services import default_stages, guardrail_stages, set_stages
from kindgi_console.api import ApiError, read_json_body
from kindgi_console.openapi import error_responses

STAGE_LIST = {"type": "array", "items": {"type": "string", "enum": list(STAGES)}, "minItems": 1, "uniqueItems": True}
STAGES_BODY = {
    "application/json": {
        "type": "object",
        "required": ["stages"],
        "additionalProperties": False,
        "properties": {
            "stages": {
                **STAGE_LIST,
                "nullable": True,
                "description": "The stages at which it applies at runtime; null: its check's defaults.",
            }
        },
    }
}
STAGES_RESPONSE = OpenApiResponse(
    {
        "type": "object",
        "properties": {
            "guardrail": {"type": "string"},
            "stages": STAGE_LIST,
            "defaults": {**STAGE_LIST, "description": "Its check's stages."},
            "custom": {"type": "boolean", "description": "false: the check's defaults apply."},
        },
    }
)


class GuardrailStagesView(GuardrailBaseView):
    """`GET, POST guardrails/{id}/stages`: the stages of a turn (`POST evaluate?stage=`) at
    which the guardrail applies. The console's state beside the document, like `shadow`:
    no revision, and the export still emits the 1.1.0 document unchanged. CI and runs
    evaluate every guardrail on whole traces, whatever its stages."""

    scopes = {"GET": "read", "POST": "author"}
    filter_backends: list[Any] = []

    @extend_schema(operation_id="guardrails_stages_read", responses={200: STAGES_RESPONSE, **error_responses(401, 404)})
    def get(self, request: Request, guardrail_id: str) -> Response:
        return Response(stages_answer(self._guardrail(guardrail_id)))

    @extend_schema(
        operation_id="guardrails_stages",
        request=STAGES_BODY,
        responses={200: STAGES_RESPONSE, **error_responses(400, 401, 403, 404)},
    )
    def post(self, request: Request, guardrail_id: str) -> Response:
        guardrail = self._guardrail(guardrail_id)
        if not Guardrail.objects.for_caller(self.caller, "author").filter(pk=guardrail.pk).exists():
            raise ApiError(
                [Issue("", "a console-wide guardrail is changed only by console admins")], status.HTTP_403_FORBIDDEN
            )
        set_stages(guardrail, stages_request(read_json_body(request)))
        return Response(stages_answer(guardrail))

    def _guardrail(self, guardrail_id: str) -> Guardrail:
        guardrail: Guardrail | None = self.get_queryset().filter(guardrail_id=guardrail_id).first()
        if guardrail is None:
            raise Http404
        return guardrail


def stages_request(body: object) -> list[str] | None:
    """The stages a request body sets (None: back to the check's defaults); ApiError naming
    the field otherwise."""
    if not isinstance(body, dict):
        raise ApiError([Issue("", "the body is an object: {stages}")])
    unknown = sorted(set(body) - {"stages"})
    if unknown:
        raise ApiError([Issue(f"/{unknown[0]}", "unknown field; use stages")])
    if "stages" not in body:
        raise ApiError([Issue("/stages", "stages is required: an array of stages, or null for the check's defaults")])
    stages = body["stages"]
    if stages is None:
        return None
    issues = validate_stages(stages, "/stages")
    if issues:
        raise ApiError(issues)
    return list(stages)


def stages_answer(guardrail: Guardrail) -> dict[str, Any]:
    return {
        "guardrail": guardrail.guardrail_id,
        "stages": guardrail_stages(guardrail),
        "defaults": default_stages(guardrail.check_name),
        "custom": guardrail.stages is not None,
    }
