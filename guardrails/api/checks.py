"""REST endpoints of what guardrails are written against: the check registry and the wire schemas."""

from __future__ import annotations

from typing import Any

from django.http import Http404
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response

from guardrails import deployment
from guardrails.api import serializers
from guardrails.engine.schema import GUARDRAIL_SCHEMA, RUNTRACE_SCHEMA
from kindgi_console.api import ConsoleAPIView
from kindgi_console.openapi import ERRORS_SCHEMA, error_responses


class CheckListView(ConsoleAPIView):
    """`GET checks`: the check registry: each check with its pack, kind and config schema."""

    filter_backends: list[Any] = []
    pagination_class = None

    @extend_schema(responses={200: serializers.CheckSerializer(many=True), **error_responses(401, 403)})
    def get(self, request: Request) -> Response:
        return Response(serializers.CheckSerializer(deployment.listed_checks(), many=True).data)


class SchemaView(ConsoleAPIView):
    """`GET schemas/{name}`: the published JSON Schemas (public)."""

    filter_backends: list[Any] = []
    permission_classes = [AllowAny]
    authentication_classes: list[Any] = []
    pagination_class = None
    schemas = {"guardrail.schema.json": GUARDRAIL_SCHEMA, "runtrace.schema.json": RUNTRACE_SCHEMA}

    @extend_schema(responses={200: OpenApiResponse({"type": "object"}), 404: OpenApiResponse(ERRORS_SCHEMA)})
    def get(self, request: Request, name: str) -> Response:
        if name not in self.schemas:
            raise Http404
        return Response(self.schemas[name])
