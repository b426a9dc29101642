"""`GET guardrails/{id}/labelled-set`: a guardrail's labelled set as JSON Lines, for CI.

One record a line (guardrails.engine.labelled): the trace's document, the label it should get
(`expected`: pass or fail), where the label came from, who gave it and when; the newest label
first. Of the caller's tenants only (`tenant` narrows to one), streamed in bounded memory; a
guardrail the caller cannot read is a 404. `guardrail_ci --labels FILE` reads the file.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import orjson
from django.http import Http404, StreamingHttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.request import Request

from guardrails.api.guardrails import GuardrailBaseView
from guardrails.models import Guardrail
from kindgi_console.openapi import error_responses
from traces.models import CalibrationItem, Violation
from traces.store import labelled_set

MEDIA_TYPE = "application/x-ndjson"
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


class GuardrailLabelledSetView(GuardrailBaseView):
    """`GET guardrails/{id}/labelled-set`: the labelled traces of the guardrail, JSON Lines."""

    scopes = {"GET": "read"}
    filter_backends: list[Any] = []
    pagination_class = None

    @extend_schema(
        operation_id="guardrails_labelled_set",
        parameters=[OpenApiParameter("tenant", str, description="Only this tenant's labels (a slug).")],
        responses={(200, MEDIA_TYPE): OpenApiTypes.STR, **error_responses(401, 403, 404)},
    )
    def get(self, request: Request, guardrail_id: str) -> StreamingHttpResponse:
        guardrail = self.get_queryset().filter(guardrail_id=guardrail_id).first()
        if guardrail is None:
            raise Http404
        items = CalibrationItem.objects.for_caller(self.caller)
        violations = Violation.objects.for_caller(self.caller)
        tenant = request.query_params.get("tenant")
        if tenant:
            items, violations = items.filter(tenant__slug=tenant), violations.filter(tenant__slug=tenant)
        response = StreamingHttpResponse(_lines(guardrail, items, violations), content_type=MEDIA_TYPE)
        response["Content-Disposition"] = f'attachment; filename="{file_name(guardrail)}"'
        return response


def file_name(guardrail: Guardrail) -> str:
    """`<id>.labels.jsonl`, the id's characters outside [A-Za-z0-9._-] as `_`."""
    return f"{_UNSAFE.sub('_', guardrail.guardrail_id)}.labels.jsonl"


def _lines(guardrail: Guardrail, items: Any, violations: Any) -> Iterator[bytes]:
    for label in labelled_set.labels(items, violations, guardrail, with_documents=True):
        yield orjson.dumps(labelled_set.record(label, guardrail)) + b"\n"
