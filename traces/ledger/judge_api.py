"""REST endpoints of the judge-model registry and of each tenant's judge policy.

Who may do what:

- Judge models are the whole console's. Reading them (`GET judge-models`, `GET
  judge-models/{id}`) needs the `read` scope or permission: authors need to see what their
  guardrails' `judgeCapabilities` can route to. A registration holds no secret (the key's
  variable name only, and whether it is set here).
- Writing them (`POST`, `PUT`, `DELETE`) is for superusers only: a registration receives
  every tenant's trace content that routes to it, so a tenant's admin may not add one for
  all tenants. No API key may write them.
- A tenant's judge policy is read by whoever may read the tenant (others get 404) and set
  (`PUT`) by a superuser or an admin of that tenant.
"""

from __future__ import annotations

from typing import Any

from django.db import IntegrityError
from django.http import Http404
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import exceptions
from rest_framework.request import Request
from rest_framework.response import Response

from guardrails.engine.judge import JUDGE_MODEL_SCHEMA, JUDGE_POLICY_SCHEMA
from guardrails.engine.types import Issue
from guardrails.models import JudgeModelRegistration, TenantJudgePolicy
from kindgi_console.api import ApiError, ConsoleAPIView, read_json_body
from kindgi_console.openapi import error_responses
from kindgi_console.tenancy.models import Tenant
from kindgi_console.tenancy.scoping import is_admin_of
from traces.judge.circuit import circuits_of
from traces.judge.registry import (
    delete_registration,
    judge_model_of,
    registration_doc,
    save_policy,
    save_registration,
    validate_policy,
    validate_registration,
)

REGISTRATION_SCHEMA = {
    **{key: value for key, value in JUDGE_MODEL_SCHEMA.items() if key not in ("$schema", "allOf")},
    "properties": {
        **JUDGE_MODEL_SCHEMA["properties"],
        "enabled": {"type": "boolean", "description": "Routed to (default true)."},
        "apiKeySet": {
            "type": "boolean",
            "nullable": True,
            "readOnly": True,
            "description": "Whether the key's variable is set here (never its value).",
        },
        "circuit": {
            "type": "object",
            "readOnly": True,
            "description": (
                "The circuit breaker of the model's endpoint: closed (calls go), open (calls fail at once "
                "until retryAt) or half-open (the next call is a probe)."
            ),
            "properties": {
                "state": {"enum": ["closed", "open", "half-open"]},
                "failures": {"type": "integer", "description": "Failed attempts in a row."},
                "since": {"type": ["string", "null"], "format": "date-time", "description": "When it opened."},
                "retryAt": {"type": ["string", "null"], "format": "date-time"},
                "lastError": {"type": ["string", "null"]},
            },
        },
    },
}
REGISTRATION_RESPONSE = OpenApiResponse(REGISTRATION_SCHEMA)
POLICY_SCHEMA = {key: value for key, value in JUDGE_POLICY_SCHEMA.items() if key != "$schema"}


def with_circuits(rows: list[JudgeModelRegistration]) -> list[dict[str, Any]]:
    """Registrations as the API shows them, each with its circuit's state now."""
    circuits = circuits_of([judge_model_of(row) for row in rows])
    return [
        {**registration_doc(row), "circuit": circuit.to_dict()} for row, circuit in zip(rows, circuits, strict=True)
    ]


def registration_with_circuit(row: JudgeModelRegistration) -> dict[str, Any]:
    return with_circuits([row])[0]


def superuser_only(view: ConsoleAPIView) -> None:
    if not view.caller.is_superuser:
        raise exceptions.PermissionDenied("only a superuser registers judge models")


def registration_payload(request: Request) -> dict[str, Any]:
    payload = read_json_body(request)
    issues = validate_registration(payload)
    if issues:
        raise ApiError(issues)
    assert isinstance(payload, dict)
    return payload


class JudgeModelListView(ConsoleAPIView):
    """`GET judge-models` lists the registry; `POST judge-models` registers one (superuser)."""

    scopes = {"GET": "read", "POST": "read"}
    pagination_class = None
    filter_backends: list[Any] = []

    @extend_schema(
        operation_id="judge_models_list",
        responses={200: OpenApiResponse({"type": "array", "items": REGISTRATION_SCHEMA}), **error_responses(401, 403)},
    )
    def get(self, request: Request) -> Response:
        return Response(with_circuits(list(JudgeModelRegistration.objects.all())))

    @extend_schema(
        operation_id="judge_models_create",
        request={"application/json": REGISTRATION_SCHEMA},
        responses={201: REGISTRATION_RESPONSE, **error_responses(400, 401, 403, 409, 415)},
    )
    def post(self, request: Request) -> Response:
        superuser_only(self)
        payload = registration_payload(request)
        if JudgeModelRegistration.objects.filter(model_id=payload["id"]).exists():
            raise ApiError(
                [
                    Issue(
                        "/id",
                        f"judge model {payload['id']!r} is already registered: PUT judge-models/{{id}} replaces it",
                    )
                ],
                409,
            )
        try:
            row = save_registration(payload)
        except IntegrityError:
            raise ApiError([Issue("/id", "this judge model was registered meanwhile")], 409) from None
        return Response(registration_with_circuit(row), status=201)


class JudgeModelDetailView(ConsoleAPIView):
    """`GET`, `PUT` (replace; superuser) and `DELETE` (superuser) of one registration."""

    scopes = {"GET": "read", "PUT": "read", "DELETE": "read"}
    filter_backends: list[Any] = []

    def registration(self, model_id: str) -> JudgeModelRegistration:
        row = JudgeModelRegistration.objects.filter(model_id=model_id).first()
        if row is None:
            raise Http404
        return row

    @extend_schema(
        operation_id="judge_models_read", responses={200: REGISTRATION_RESPONSE, **error_responses(401, 403, 404)}
    )
    def get(self, request: Request, model_id: str) -> Response:
        return Response(registration_with_circuit(self.registration(model_id)))

    @extend_schema(
        operation_id="judge_models_replace",
        request={"application/json": REGISTRATION_SCHEMA},
        responses={200: REGISTRATION_RESPONSE, **error_responses(400, 401, 403, 404, 415)},
    )
    def put(self, request: Request, model_id: str) -> Response:
        superuser_only(self)
        self.registration(model_id)
        payload = registration_payload(request)
        if payload["id"] != model_id:
            raise ApiError([Issue("/id", f"the id is {model_id!r}, as in the URL: a registration is not renamed")])
        return Response(registration_with_circuit(save_registration(payload, model_id=model_id)))

    @extend_schema(operation_id="judge_models_delete", responses={204: None, **error_responses(401, 403, 404)})
    def delete(self, request: Request, model_id: str) -> Response:
        superuser_only(self)
        delete_registration(self.registration(model_id).model_id)
        return Response(status=204)


class TenantJudgePolicyView(ConsoleAPIView):
    """`GET` and `PUT tenants/{slug}/judge-policy`: which judge models the tenant may use."""

    scopes = {"GET": "read", "PUT": "read"}
    filter_backends: list[Any] = []

    def readable_tenant(self, slug: str) -> Tenant:
        """The tenant if the caller may read it; 404 otherwise, so that it does not leak."""
        tenant = self.caller.tenants("read").filter(slug=slug).first()
        if tenant is None:
            raise Http404
        return tenant

    @extend_schema(
        operation_id="tenant_judge_policy_read",
        responses={200: OpenApiResponse(POLICY_SCHEMA), **error_responses(401, 403, 404)},
    )
    def get(self, request: Request, slug: str) -> Response:
        tenant = self.readable_tenant(slug)
        allowed = TenantJudgePolicy.objects.filter(tenant=tenant).values_list("allowed_models", flat=True).first()
        return Response({"allowedModels": allowed})

    @extend_schema(
        operation_id="tenant_judge_policy_replace",
        request={"application/json": POLICY_SCHEMA},
        responses={200: OpenApiResponse(POLICY_SCHEMA), **error_responses(400, 401, 403, 404, 415)},
    )
    def put(self, request: Request, slug: str) -> Response:
        tenant = self.readable_tenant(slug)
        # A superuser, or a signed-in admin of the tenant: never an API key.
        if self.caller.key is not None or not is_admin_of(self.caller.user, tenant):
            raise exceptions.PermissionDenied("only an admin of this tenant sets its judge policy")
        payload = read_json_body(request)
        issues = validate_policy(payload)
        if issues:
            raise ApiError(issues)
        policy = save_policy(tenant, payload)
        return Response({"allowedModels": policy.allowed_models})
