"""REST endpoint of a guardrail's shadow mode: record without enforcing, or promote."""

from __future__ import annotations

from typing import Any

from django.http import Http404
from drf_spectacular.utils import extend_schema
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response

from guardrails.api.guardrails import GuardrailBaseView
from guardrails.api.serializers import SHADOW_BODY, SHADOW_RESPONSE
from guardrails.engine.types import Issue
from guardrails.models import Guardrail
from guardrails.services import set_shadow
from kindgi_console.api import ApiError, read_json_body
from kindgi_console.openapi import error_responses


class GuardrailShadowView(GuardrailBaseView):
    """`POST guardrails/{id}/shadow`: put a guardrail in shadow, or promote its current
    revision (audited as `guardrail.promote`), which stops the revision enforced beside it.

    The console's state beside the document, like `enabled`: no revision, and the export
    still emits the 1.1.0 document unchanged.
    """

    scopes = {"POST": "author"}
    filter_backends: list[Any] = []

    @extend_schema(
        operation_id="guardrails_shadow",
        request=SHADOW_BODY,
        responses={200: SHADOW_RESPONSE, **error_responses(400, 401, 403, 404)},
    )
    def post(self, request: Request, guardrail_id: str) -> Response:
        guardrail = self.get_queryset().filter(guardrail_id=guardrail_id).first()
        if guardrail is None:
            raise Http404
        if not Guardrail.objects.for_caller(self.caller, "author").filter(pk=guardrail.pk).exists():
            raise ApiError(
                [Issue("", "a console-wide guardrail is changed only by console admins")], status.HTTP_403_FORBIDDEN
            )
        shadow, rate = shadow_request(read_json_body(request))
        set_shadow(guardrail, shadow, rate)
        return Response(
            {
                "guardrail": guardrail.guardrail_id,
                "revision": guardrail.revision,
                "shadow": guardrail.shadow,
                "sampleRate": guardrail.shadow_sample_rate,
                "enforcedRevision": guardrail.enforced_revision if guardrail.shadow else None,
            }
        )


def shadow_request(body: object) -> tuple[bool, float | None]:
    """(shadow, sample rate) from a request body; ApiError naming the field otherwise."""
    if not isinstance(body, dict):
        raise ApiError([Issue("", "the body is an object: {shadow, sampleRate}")])
    unknown = sorted(set(body) - {"shadow", "sampleRate"})
    if unknown:
        raise ApiError([Issue(f"/{unknown[0]}", "unknown field; use shadow, sampleRate")])
    shadow = body.get("shadow")
    if not isinstance(shadow, bool):
        raise ApiError([Issue("/shadow", "shadow is true or false")])
    rate = body.get("sampleRate")
    if rate is not None and (isinstance(rate, bool) or not isinstance(rate, int | float) or not 0 < rate <= 1):
        raise ApiError([Issue("/sampleRate", "sampleRate is a number above 0 and at most 1, or null")])
    return shadow, (float(rate) if rate is not None and shadow else None)
