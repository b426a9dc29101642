"""`GET guardrails/{id}/quality`: what reviewers said of a guardrail's violations, and how its
newest calibration sample agrees with people's labels."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from django.http import Http404
from django.utils.dateparse import parse_datetime
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.request import Request
from rest_framework.response import Response

from guardrails.api.guardrails import GuardrailBaseView
from guardrails.engine.types import Issue
from guardrails.models import Guardrail
from kindgi_console.api import ApiError
from kindgi_console.openapi import error_responses
from traces.models import CalibrationSample, Violation, ViolationDay
from traces.review import quality
from traces.review.calibration import sample_as_dict
from traces.review.serializers import QUALITY_RESPONSE

#: The newest samples read for the per-revision figures (a guardrail is calibrated a few times).
MAX_SAMPLES = 50


class GuardrailQualityView(GuardrailBaseView):
    """`GET guardrails/{id}/quality`: what reviewers said of its violations, per revision.

    Of the violations of the caller's tenants (`tenant` narrows to one), created in
    [`since`, `until`) when given (RFC 3339 date-times).
    """

    scopes = {"GET": "read"}
    filter_backends: list[Any] = []

    @extend_schema(
        operation_id="guardrails_quality",
        parameters=[
            OpenApiParameter("since", OpenApiTypes.DATETIME),
            OpenApiParameter("until", OpenApiTypes.DATETIME),
            OpenApiParameter("tenant", str),
        ],
        responses={200: QUALITY_RESPONSE, **error_responses(400, 401, 403, 404)},
    )
    def get(self, request: Request, guardrail_id: str) -> Response:
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
        calibrated = self.calibrations(guardrail)
        return Response(
            {
                "guardrail": guardrail.guardrail_id,
                "since": since.isoformat() if since else None,
                "until": until.isoformat() if until else None,
                **overall.as_dict(),
                "revisions": [
                    {**item.as_dict(), "calibration": calibrated.get(item.revision or 0)} for item in revisions
                ],
                "calibration": self.calibration(guardrail),
            }
        )

    def samples(self, guardrail: Guardrail) -> QuerySet[CalibrationSample]:
        samples = CalibrationSample.objects.for_caller(self.caller).filter(guardrail=guardrail)
        if self.request.query_params.get("tenant"):
            samples = samples.filter(tenant__slug=self.request.query_params["tenant"])
        return samples.select_related("guardrail", "revision").order_by("-pk")

    def calibration(self, guardrail: Guardrail) -> dict[str, Any] | None:
        """The newest calibration sample of the guardrail the caller reads, with its agreement."""
        sample = self.samples(guardrail).first()
        return None if sample is None else sample_as_dict(sample)

    def calibrations(self, guardrail: Guardrail) -> dict[int, dict[str, Any]]:
        """Per revision number, the agreement of its newest calibration sample."""
        newest: dict[int, CalibrationSample] = {}
        for sample in self.samples(guardrail)[:MAX_SAMPLES]:
            newest.setdefault(sample.revision.number, sample)
        return {number: sample_as_dict(sample)["agreement"] for number, sample in newest.items()}

    def moment(self, name: str) -> Any:
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
