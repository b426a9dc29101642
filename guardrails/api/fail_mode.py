"""REST endpoint of a guardrail's fail mode: what an `error` does to a turn at runtime."""

from __future__ import annotations

from typing import Any

from django.http import Http404
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response

from guardrails.api.guardrails import GuardrailBaseView
from guardrails.engine.types import Issue
from guardrails.models import Guardrail
from guardrails.services import set_fail_mode
from kindgi_console.api import ApiError, read_json_body
from kindgi_console.openapi import error_responses

FAIL_MODES = ("pass", "halt")
FAIL_MODE_SCHEMA = {
    "type": "object",
    "required": ["onError"],
    "additionalProperties": False,
    "properties": {
        "onError": {
            "enum": list(FAIL_MODES),
            "description": "An error at runtime: pass (the turn goes on, the default) or halt (the turn fails "
            "with reason guardrail-error, naming the guardrail; only for guardrails whose action is halt).",
        }
    },
}
FAIL_MODE_RESPONSE = OpenApiResponse(
    {"type": "object", "properties": {"guardrail": {"type": "string"}, "onError": {"enum": list(FAIL_MODES)}}}
)


class GuardrailFailModeView(GuardrailBaseView):
    """`GET` and `PUT guardrails/{id}/fail-mode`: pass on error, or fail closed.

    The console's state beside the document, as shadow is: no revision, and the export
    still emits the 1.1.0 document unchanged.
    """

    scopes = {"GET": "read", "PUT": "author"}
    filter_backends: list[Any] = []

    def guardrail(self, guardrail_id: str) -> Guardrail:
        guardrail: Guardrail | None = self.get_queryset().filter(guardrail_id=guardrail_id).first()
        if guardrail is None:
            raise Http404
        return guardrail

    @extend_schema(
        operation_id="guardrails_fail_mode_read", responses={200: FAIL_MODE_RESPONSE, **error_responses(401, 403, 404)}
    )
    def get(self, request: Request, guardrail_id: str) -> Response:
        return Response(answer(self.guardrail(guardrail_id)))

    @extend_schema(
        operation_id="guardrails_fail_mode_replace",
        request={"application/json": FAIL_MODE_SCHEMA},
        responses={200: FAIL_MODE_RESPONSE, **error_responses(400, 401, 403, 404, 415)},
    )
    def put(self, request: Request, guardrail_id: str) -> Response:
        guardrail = self.guardrail(guardrail_id)
        if not Guardrail.objects.for_caller(self.caller, "author").filter(pk=guardrail.pk).exists():
            raise ApiError(
                [Issue("", "a console-wide guardrail is changed only by console admins")], status.HTTP_403_FORBIDDEN
            )
        set_fail_mode(guardrail, fail_mode_request(read_json_body(request), guardrail.on_violation))
        return Response(answer(guardrail))


def answer(guardrail: Guardrail) -> dict[str, Any]:
    return {"guardrail": guardrail.guardrail_id, "onError": guardrail.on_error}


def fail_mode_request(body: object, on_violation: str) -> str:
    """The fail mode a request body asks for; ApiError naming the field otherwise."""
    if not isinstance(body, dict):
        raise ApiError([Issue("", "the body is an object: {onError}")])
    unknown = sorted(set(body) - {"onError"})
    if unknown:
        raise ApiError([Issue(f"/{unknown[0]}", "unknown field; use onError")])
    on_error = body.get("onError")
    if on_error not in FAIL_MODES:
        raise ApiError([Issue("/onError", "onError is pass or halt")])
    if on_error == "halt" and on_violation != "halt":
        raise ApiError(
            [Issue("/onError", f"only a guardrail whose action is halt fails closed; this one's is {on_violation!r}")]
        )
    return str(on_error)
