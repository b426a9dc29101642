"""REST endpoint that checks a guardrail document without storing it."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema
from rest_framework.request import Request
from rest_framework.response import Response

from guardrails.api import serializers
from guardrails.api.serializers import ANY_BODY
from guardrails.services import register_document
from kindgi_console.api import ConsoleAPIView, read_json_body
from kindgi_console.openapi import error_responses


class GuardrailValidateView(ConsoleAPIView):
    """`POST guardrails/validate`: schema and registration, saving nothing."""

    filter_backends: list[Any] = []
    scopes = {"POST": "read"}

    @extend_schema(
        request=ANY_BODY,
        responses={200: serializers.ValidationSerializer, **error_responses(400, 401, 403, 413, 415, 429)},
    )
    def post(self, request: Request) -> Response:
        registration = register_document(read_json_body(request))
        return Response(
            {
                "valid": registration.valid,
                "errors": [issue.as_dict() for issue in registration.errors],
                "warnings": [issue.as_dict() for issue in registration.warnings],
            }
        )
