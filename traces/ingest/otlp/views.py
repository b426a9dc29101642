"""`POST /api/v1/otlp/v1/traces`: OTLP/HTTP trace export, answered as the OTLP specification says."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import InterfaceError, OperationalError
from django.http import HttpResponse
from drf_spectacular.utils import OpenApiResponse, extend_schema
from kombu.exceptions import OperationalError as BrokerError
from rest_framework import exceptions
from rest_framework.renderers import JSONRenderer
from rest_framework.request import Request

from kindgi_console import deadline
from kindgi_console.api import ApiKeyAuthentication, ConsoleAPIView
from kindgi_console.tenancy.scoping import TenantDenied
from traces.ingest.otlp import turns, wire

#: Seconds an exporter is asked to wait when the database is unavailable.
UNAVAILABLE_RETRY_S = 5

OTLP_BODY = {
    wire.PROTOBUF: {
        "type": "string",
        "format": "binary",
        "description": "An ExportTraceServiceRequest (opentelemetry-proto).",
    },
    wire.JSON: {"type": "object", "description": "An ExportTraceServiceRequest in OTLP's JSON encoding."},
}


class OtlpTracesView(ConsoleAPIView):
    """Spans from any OpenTelemetry exporter become run traces, one per agent turn (docs/otlp.md).

    Authenticated by API key only (`ingest` scope), as an exporter sends it in
    `OTEL_EXPORTER_OTLP_HEADERS`. Every answer, errors too, is in the request's encoding.
    """

    authentication_classes = [ApiKeyAuthentication]
    scopes = {"POST": "ingest"}
    runtime_methods = ("POST",)
    time_limited = ("POST",)
    filter_backends: list[Any] = []

    @extend_schema(
        operation_id="otlp_traces_export",
        request=OTLP_BODY,
        responses={
            200: OpenApiResponse(
                description="An ExportTraceServiceResponse, with partial_success when some spans were refused."
            ),
            **{
                code: OpenApiResponse(description="A google.rpc.Status.")
                for code in (400, 401, 403, 413, 415, 429, 503)
            },
        },
    )
    def post(self, request: Request) -> HttpResponse:
        encoding = wire.encoding_of(request.content_type)
        body = wire.read_body(request._request, settings.KINDGI_MAX_REQUEST_BYTES)
        outcome = turns.receive(self.caller, wire.decode(body, encoding))
        return wire.export_response(outcome.rejected, outcome.message, encoding)

    def perform_content_negotiation(self, request: Request, force: bool = False) -> tuple[Any, str]:
        """The answer's encoding follows the request's, whatever Accept says."""
        return JSONRenderer(), wire.JSON

    def handle_exception(self, exc: Exception) -> HttpResponse:  # type: ignore[override]  # a protobuf body
        encoding = _encoding_or_json(self.request)
        error, headers = _as_otlp_error(exc, self.request)
        if error is None:  # not an exporter's concern (a method not allowed): the API's shape
            response: HttpResponse = super().handle_exception(exc)
            return response
        return wire.error_response(error, encoding, headers)


def _encoding_or_json(request: Request) -> str:
    try:
        return wire.encoding_of(request.content_type)
    except wire.OtlpError:
        return wire.JSON


def _as_otlp_error(exc: Exception, request: Request) -> tuple[wire.OtlpError | None, dict[str, str]]:
    """The HTTP status, message and headers OTLP exporters understand, for what went wrong."""
    if isinstance(exc, wire.OtlpError):
        return exc, {}
    if isinstance(exc, deadline.DeadlineExceeded):  # stopped, nothing stored: exporters retry it later
        return wire.OtlpError(503, str(exc.detail), retry_after=deadline.RETRY_AFTER_S), {}
    if isinstance(exc, exceptions.NotAuthenticated | exceptions.AuthenticationFailed):
        challenge = ApiKeyAuthentication().authenticate_header(request)
        return wire.OtlpError(401, str(exc.detail)), {"WWW-Authenticate": challenge}
    if isinstance(exc, exceptions.PermissionDenied | TenantDenied):
        return wire.OtlpError(403, str(exc)), {}
    if isinstance(exc, exceptions.Throttled):
        return wire.OtlpError(429, str(exc.detail), retry_after=getattr(exc, "wait", None) or 1), {}
    if isinstance(exc, OperationalError | InterfaceError | BrokerError):
        return wire.OtlpError(
            503, "the console's database or task queue is unavailable: try again", retry_after=UNAVAILABLE_RETRY_S
        ), {}
    return None, {}
