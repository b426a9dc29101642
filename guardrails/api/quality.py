"""REST endpoints of a guardrail's quality figures and its shadow mode."""

from __future__ import annotations

from typing import Any

from django.http import Http404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response

from guardrails import quality
from guardrails.api.guardrails import GuardrailBaseView
from guardrails.api.serializers import (
    QUALITY_RESPONSE,
    SHADOW_BODY,
    SHADOW_RESPONSE,
)
from guardrails.engine.judge import KIND as JUDGE_KIND
from guardrails.engine.types import Issue
from guardrails.models import Guardrail
from guardrails.services import set_shadow
from kindgi_console.api import ApiError, read_json_body
from kindgi_console.openapi import error_responses


class GuardrailQualityView(GuardrailBaseView):
    """`GET guardrails/{id}/quality`: what reviewers said of its violations, per revision.

    Of the violations of the caller's tenants (`tenant` narrows to one), created in
    [`since`, `until`) when given (RFC 3339 date-times).
    """

    scopes = {"GET": "read"}
    filter_backends: list[Any] = []

    @extend_schema(operation_id="guardrails_quality", parameters=[
        OpenApiParameter("since", OpenApiTypes.DATETIME), OpenApiParameter("until", OpenApiTypes.DATETIME),
        OpenApiParameter("tenant", str)],
        responses={200: QUALITY_RESPONSE, **error_responses(400, 401, 403, 404)})
    def get(self, request: Request, guardrail_id: str) -> Response:
        from traces.models import Violation, ViolationDay

        guardrail = self.get_queryset().filter(guardrail_id=guardrail_id).first()
        if guardrail is None:
            raise Http404
        since, until = self.moment("since"), self.moment("until")
        violations = Violation.objects.for_caller(self.caller).filter(guardrail=guardrail)
        days = ViolationDay.objects.for_caller(self.caller).filter(guardrail=guardrail)
        if request.query_params.get("tenant"):
            violations = violations.filter(tenant__slug=request.query_params["tenant"])
            days = days.filter(tenant__slug=request.query_params["tenant"])
        overall, revisions = quality.rolled_up_quality(days, violations, since, until)
        return Response({
            "guardrail": guardrail.guardrail_id,
            "since": since.isoformat() if since else None, "until": until.isoformat() if until else None,
            **overall.as_dict(), "revisions": [item.as_dict() for item in revisions],
            "calibration": self.calibration(guardrail),
        })

    def calibration(self, guardrail: Guardrail) -> dict[str, Any] | None:
        """The newest calibration sample of the guardrail the caller reads, with its agreement."""
        from traces.calibration import sample_as_dict
        from traces.models import CalibrationSample

        samples = CalibrationSample.objects.for_caller(self.caller).filter(guardrail=guardrail)
        if self.request.query_params.get("tenant"):
            samples = samples.filter(tenant__slug=self.request.query_params["tenant"])
        sample = samples.select_related("guardrail", "revision").order_by("-pk").first()
        return None if sample is None else sample_as_dict(sample)

    def moment(self, name: str) -> Any:
        from django.utils.dateparse import parse_datetime

        raw = self.request.query_params.get(name)
        if not raw:
            return None
        try:
            moment = parse_datetime(raw)
        except ValueError:
            moment = None
        if moment is None or moment.tzinfo is None:
            raise ApiError([Issue(f"/{name}", f"{name} is an RFC 3339 date-time with a time zone")])
        return moment


class GuardrailShadowView(GuardrailBaseView):
    """`POST guardrails/{id}/shadow`: put an llm-judge guardrail in shadow, or promote it.

    The console's state beside the document, like `enabled`: no revision, and the export
    still emits the 1.1.0 document unchanged.
    """

    scopes = {"POST": "author"}
    filter_backends: list[Any] = []

    @extend_schema(operation_id="guardrails_shadow", request=SHADOW_BODY,
                   responses={200: SHADOW_RESPONSE, **error_responses(400, 401, 403, 404)})
    def post(self, request: Request, guardrail_id: str) -> Response:
        guardrail = self.get_queryset().filter(guardrail_id=guardrail_id).first()
        if guardrail is None:
            raise Http404
        if not Guardrail.objects.for_caller(self.caller, "author").filter(pk=guardrail.pk).exists():
            raise ApiError([Issue("", "a console-wide guardrail is changed only by console "
                                      "admins")], status.HTTP_403_FORBIDDEN)
        shadow, rate = shadow_request(read_json_body(request), guardrail.kind)
        set_shadow(guardrail, shadow, rate)
        return Response({"guardrail": guardrail.guardrail_id, "shadow": guardrail.shadow,
                         "sampleRate": guardrail.shadow_sample_rate})


def shadow_request(body: object, kind: str) -> tuple[bool, float | None]:
    """(shadow, sample rate) from a request body; ApiError naming the field otherwise."""
    if not isinstance(body, dict):
        raise ApiError([Issue("", "the body is an object: {shadow, sampleRate}")])
    unknown = sorted(set(body) - {"shadow", "sampleRate"})
    if unknown:
        raise ApiError([Issue(f"/{unknown[0]}", "unknown field; use shadow, sampleRate")])
    shadow = body.get("shadow")
    if not isinstance(shadow, bool):
        raise ApiError([Issue("/shadow", "shadow is true or false")])
    if shadow and kind != JUDGE_KIND:
        raise ApiError([Issue("/shadow", "only an llm-judge guardrail is put in shadow")])
    rate = body.get("sampleRate")
    if rate is not None and (isinstance(rate, bool) or not isinstance(rate, int | float) or not 0 < rate <= 1):
        raise ApiError([Issue("/sampleRate", "sampleRate is a number above 0 and at most 1, or null")])
    return shadow, (float(rate) if rate is not None and shadow else None)
