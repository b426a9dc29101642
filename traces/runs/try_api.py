"""`POST guardrails/try`: an unsaved guardrail evaluated against one trace, pasted or stored.

It lives with the traces because it reads a stored trace and judges with the trace's
tenant's judge services (charged to the ledger), as every evaluation path does.
"""

from __future__ import annotations

from typing import Any, cast

from django.conf import settings
from drf_spectacular.utils import extend_schema
from rest_framework.request import Request
from rest_framework.response import Response

from guardrails import deployment
from guardrails.engine.evaluate import evaluate_guardrail
from guardrails.engine.judge import KIND as JUDGE_KIND
from guardrails.engine.sandbox.posture import sandbox_level
from guardrails.engine.schema import validate_runtrace
from guardrails.engine.types import Issue, Mode, Result
from guardrails.services import register_document
from kindgi_console.api import ApiError, ConsoleAPIView, read_json_body
from kindgi_console.openapi import error_responses
from traces.judge.services import EvaluationServices, console_judge_services
from traces.models import RunTrace
from traces.runs.serializers import TRY_BODY, TRY_RESPONSE


def prefixed(issues: list[Issue], prefix: str) -> list[Issue]:
    return [Issue(prefix + issue.path, issue.message) for issue in issues]


class GuardrailTryView(ConsoleAPIView):
    """`POST guardrails/try`: evaluate an unsaved guardrail against one trace; stores nothing.

    Same registration as saving and the same engine as the server's enforcement paths, so
    that what an author sees here is what runtimes and CI will do.
    """

    filter_backends: list[Any] = []
    scopes = {"POST": "author"}

    @extend_schema(request=TRY_BODY, responses={200: TRY_RESPONSE, **error_responses(400, 401, 403, 413, 415, 429)})
    def post(self, request: Request) -> Response:
        body = read_json_body(request)
        if not isinstance(body, dict):
            raise ApiError([Issue("", "the body is an object: {guardrail, trace or traceId, mode}")])
        mode = body.get("mode") or default_try_mode(body.get("guardrail"))
        issues = [] if mode in ("runtime", "ci") else [Issue("/mode", "mode is 'runtime' or 'ci'")]
        registration = register_document(body.get("guardrail"))
        issues += prefixed(registration.errors, "/guardrail")
        trace, trace_issues = self.trace_of(body)
        issues += trace_issues
        if issues or registration.guardrail is None:
            raise ApiError(issues)
        guardrail = registration.guardrail
        with self.services(trace, guardrail.document) as services:
            if guardrail.kind == JUDGE_KIND and services.judge is None:
                result = no_judge_result(guardrail)
            else:
                result = evaluate_guardrail(
                    guardrail, trace, services.context(trace, cast(Mode, mode)), engine=deployment.engine()
                )
        return Response(
            {"result": result.as_dict(), "mode": mode, "warnings": [w.as_dict() for w in registration.warnings]}
        )

    def trace_of(self, body: dict[str, Any]) -> tuple[dict[str, Any], list[Issue]]:
        """The pasted trace, validated, or the stored one named by `traceId`."""
        if "trace" in body:
            trace = body["trace"]
            issues = validate_runtrace(trace, max_depth=settings.KINDGI_MAX_DEPTH)
            return (trace if isinstance(trace, dict) else {}), prefixed(issues, "/trace")
        trace_id = body.get("traceId")
        if not isinstance(trace_id, str) or not trace_id:
            return {}, [Issue("/trace", "give a trace, or the traceId of a stored trace")]
        if "\x00" in trace_id:  # no stored id holds one, and PostgreSQL cannot compare it
            return {}, [Issue("/traceId", "the NUL character is not allowed")]
        stored = (
            RunTrace.objects.for_caller(self.caller)
            .filter(trace_id=trace_id)
            .select_related("tenant")
            .order_by("-received_at")
            .first()
        )
        if stored is None:
            return {}, [Issue("/traceId", f"no trace {trace_id!r} of yours is stored")]
        return {"tenant": stored.tenant.slug, **stored.document}, []

    def services(self, trace: dict[str, Any], document: Any) -> EvaluationServices:
        """A sandboxed pack check gets the deployment's sandbox pool; an llm-judge draft the
        judge its tenant's policy routes to (the trace's tenant when the caller reads it, else
        the caller's one tenant), charged to the ledger like any judgement of that tenant."""
        services = EvaluationServices()
        if sandbox_level(document) != "none":
            services.sandbox = deployment.sandbox_pool()
        if document.get("kind") == JUDGE_KIND:
            tenant = self.judge_tenant(trace)
            if tenant is not None:
                services.judge = console_judge_services(tenant)
        return services

    def judge_tenant(self, trace: dict[str, Any]) -> Any:
        readable = self.caller.tenants("read")
        named = trace.get("tenant")
        if isinstance(named, str) and named:
            return readable.filter(slug=named).first()
        found = list(readable[:2])
        return found[0] if len(found) == 1 else None


def default_try_mode(document: object) -> str:
    """The mode a draft is tried in when none is asked: runtime for a runtime-only scope."""
    scope = document.get("scope") if isinstance(document, dict) else None
    when = scope.get("when") if isinstance(scope, dict) else None
    return "runtime" if when == "runtime-only" else "ci"


def no_judge_result(guardrail: Any) -> Result:
    """Why an llm-judge draft cannot be tried here, as a result that says it plainly."""
    return Result(
        guardrail=guardrail.id,
        revision=None,
        status="error",
        action=guardrail.on_violation,
        severity=guardrail.severity,
        reason="An llm-judge guardrail is tried with the judge its tenant's policy chooses: pick a "
        "stored trace of your tenant, or give the pasted trace the tenant it belongs to.",
    )
