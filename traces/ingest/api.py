"""REST endpoints of traces: the list, ingestion, a trace by its id, and the runtime verdict."""

from __future__ import annotations

import time
from typing import Any

import orjson
from django.conf import settings
from django.db.models import Prefetch
from django.http import Http404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response

from guardrails.engine.stages import STAGES, Stage, stage_step
from guardrails.engine.types import Issue, Result, TurnVerdict
from kindgi_console import deadline, instruments
from kindgi_console.api import ApiError, ConsoleAPIView, read_json_body, ridden
from kindgi_console.openapi import ERRORS_SCHEMA, error_responses
from kindgi_console.renderers import ORJSONRenderer
from kindgi_console.tenancy.scoping import TenantDenied
from traces.ingest import documents, serializers
from traces.ingest.evaluate import enforced_now, enforced_stamp_value, queue_runtime_evaluation, runtime_verdict
from traces.ingest.serializers import BATCH_SCHEMA, ITEM_SCHEMA, TRACE_BODY, VERDICT_BODY, VERDICT_SCHEMA
from traces.ingest.verdicts import store_verdict
from traces.judge.services import evaluation_services
from traces.models import EvaluationResult, RunTrace
from traces.store import filters

PAST_DEADLINE = OpenApiResponse(
    ERRORS_SCHEMA,
    description="The database is unavailable, or the request ran past KINDGI_REQUEST_TIME_LIMIT_S and "
    "stored nothing: retry after Retry-After seconds, with fewer traces when it was the limit.",
)


class TraceListView(ConsoleAPIView):
    """`GET traces` lists the caller's tenants' traces; `POST traces` ingests."""

    queryset = RunTrace.objects.select_related("tenant").defer("document")
    serializer_class = serializers.TraceSummarySerializer
    filterset_class = filters.TraceFilter
    scopes = {"GET": "read", "POST": "ingest"}
    runtime_methods = ("POST",)
    ordering_field = "received_at"
    time_limited = ("POST",)
    renderer_classes = [ORJSONRenderer]  # a batch's answer is a result per trace

    @extend_schema(
        operation_id="traces_list",
        responses={200: serializers.TraceSummarySerializer(many=True), **error_responses(400, 401, 403)},
    )
    def get(self, request: Request) -> Response:
        page = self.paginate_queryset(self.filter_queryset(self.get_queryset()))
        return self.get_paginated_response(self.get_serializer(page, many=True).data)

    @extend_schema(
        operation_id="traces_ingest",
        request=TRACE_BODY,
        responses={
            201: OpenApiResponse(ITEM_SCHEMA, description="Stored."),
            200: OpenApiResponse(ITEM_SCHEMA, description="The same trace was already stored."),
            207: OpenApiResponse(BATCH_SCHEMA, description="A batch: one result per trace."),
            409: OpenApiResponse(ITEM_SCHEMA, description="Another trace has this id."),
            **error_responses(400, 401, 403, 413, 415, 429),
            503: PAST_DEADLINE,
        },
    )
    def post(self, request: Request) -> Response:
        payload = read_json_body(request)
        if isinstance(payload, dict) and "traces" in payload and "id" not in payload:
            return self._ingest_batch(payload)
        item = documents.prepare(self.caller, payload, 0)
        documents.store([item], on_created=queue_runtime_evaluation)
        return Response(item.as_dict(), status=SINGLE_STATUS[item.status])

    def _ingest_batch(self, payload: dict[str, Any]) -> Response:
        batch = payload["traces"]
        extra = sorted(set(payload) - {"traces"})
        if extra:
            raise ApiError([Issue(f"/{extra[0]}", "a batch has only the field `traces`")])
        if not isinstance(batch, list):
            raise ApiError([Issue("/traces", "`traces` is an array of RunTraces")])
        if len(batch) > settings.KINDGI_MAX_BATCH:
            raise ApiError(
                [
                    Issue(
                        "/traces",
                        f"a batch holds at most {settings.KINDGI_MAX_BATCH} "
                        f"traces, not {len(batch)}: nothing was stored",
                    )
                ]
            )
        items = documents.prepare_all(self.caller, batch)
        documents.store(items, on_created=queue_runtime_evaluation)
        return Response({"results": [item.as_dict() for item in items]}, status=207)


SINGLE_STATUS = {
    documents.CREATED: status.HTTP_201_CREATED,
    documents.DUPLICATE: status.HTTP_200_OK,
    documents.CONFLICT: status.HTTP_409_CONFLICT,
    documents.INVALID: status.HTTP_400_BAD_REQUEST,
}


class TraceDetailView(ConsoleAPIView):
    """`GET traces/{id}`: a trace by the runtime's id, with its results."""

    serializer_class = serializers.TraceDetailSerializer
    queryset = RunTrace.objects.select_related("tenant").prefetch_related(
        Prefetch("results", queryset=EvaluationResult.objects.select_related("guardrail", "revision").order_by("id"))
    )

    @extend_schema(
        operation_id="traces_read",
        parameters=[
            OpenApiParameter(
                "tenant", str, description="The tenant, when several of the caller's tenants have a trace with this id."
            )
        ],
        responses={200: serializers.TraceDetailSerializer, **error_responses(400, 401, 403, 404)},
    )
    def get(self, request: Request, trace_id: str) -> Response:
        matches = self.get_queryset().filter(trace_id=trace_id)
        tenant = request.query_params.get("tenant")
        if tenant:
            matches = matches.filter(tenant__slug=tenant)
        found = list(matches[:2])
        if not found:
            raise Http404
        if len(found) > 1:
            raise ApiError(
                [Issue("/tenant", "several of your tenants have a trace with this id: name one with ?tenant=")]
            )
        return Response(self.get_serializer(found[0]).data)


class EvaluateView(ConsoleAPIView):
    """`POST evaluate`: the runtime verdict, stored with its results unless ?store=false."""

    scopes = {"POST": "evaluate"}
    runtime_methods = ("POST",)
    filter_backends: list[Any] = []
    renderer_classes = [ORJSONRenderer]
    time_limited = ("POST",)

    @extend_schema(
        request=VERDICT_BODY,
        parameters=[
            OpenApiParameter(
                "store", OpenApiTypes.BOOL, description="false: store nothing, only answer the verdict (default true)."
            ),
            OpenApiParameter(
                "stage",
                str,
                enum=list(STAGES),
                description="The stage of the turn checked (default output: the whole turn). input: before the "
                "model runs; tool-call: before the last of toolCalls (the proposed call) runs. The guardrails "
                "that do not apply at the stage are skipped (skipReason stage). The same turn checked again "
                "under its id with a document that extends the stored one updates it.",
            ),
        ],
        responses={
            200: OpenApiResponse(VERDICT_SCHEMA),
            **error_responses(400, 401, 403, 413, 415, 429),
            503: PAST_DEADLINE,
        },
    )
    def post(self, request: Request) -> Response:
        # The guardrails are evaluated by this instant (judge calls get what is left of it):
        # those still to be evaluated then are errors with reason "deadline", and the
        # verdict is answered. The request's own deadline comes no later.
        request_deadline = deadline.instant()
        until = time.monotonic() + settings.KINDGI_EVALUATE_TIME_LIMIT_S
        if request_deadline is not None:
            until = min(until, request_deadline)
        storing = self._store_flag(request)
        stage = self._stage(request)
        payload = read_json_body(request)
        item = documents.prepare(self.caller, payload, 0, scope="evaluate") if storing else self._unstored_item(payload)
        if item.errors:
            raise ApiError(item.errors)
        assert item.document is not None
        if stage == "tool-call" and not item.document.get("toolCalls"):
            raise ApiError([Issue("/toolCalls", "at stage tool-call the proposed call is the last of toolCalls")])
        deadline.check("reading the trace")
        enforced = enforced_now(item.tenant or self._named_tenant(item.document), ridden(request))
        started = time.perf_counter()
        with evaluation_services(item.tenant, until=until) as services:
            verdict = runtime_verdict(item.document, enforced, services, deadline=until, stage=stage)
        count_verdict(verdict, stage, time.perf_counter() - started)
        answer: dict[str, Any] = {
            "turn": verdict.turn,
            "reason": verdict.reason,
            "stage": stage,
            "haltedBy": halted_by(verdict) if verdict.turn == "failed" else None,
            "results": [answered(result) for result in verdict.results],
        }
        if verdict.error is not None:
            answer["error"] = verdict.error
        if storing:
            if verdict.withheld:
                documents.withhold_output(item)
            store_verdict(item, verdict.results, enforced, services.judge, (stage, stage_step(item.document, stage)))
            answer["trace"] = item.as_dict()
        return Response(answer)

    def key_rider(self) -> str | None:
        """The enforced guardrails' stamp, read in the API key's statement (`ApiKeyAuthentication`)."""
        return enforced_stamp_value() if self.request.method == "POST" else None

    @staticmethod
    def _stage(request: Request) -> Stage:
        raw = request.query_params.get("stage", "output")
        for stage in STAGES:
            if raw == stage:
                return stage
        raise ApiError([Issue("/stage", f"stage is one of {', '.join(STAGES)}")])

    @staticmethod
    def _store_flag(request: Request) -> bool:
        raw = request.query_params.get("store", "true").lower()
        if raw not in ("true", "false", "1", "0"):
            raise ApiError([Issue("/store", "store is true or false")])
        return raw in ("true", "1")

    def _named_tenant(self, document: dict[str, Any]) -> Any:
        """The tenant an unstored trace names, if the caller reads it (whose guardrails apply)."""
        return self.caller.tenants("read").filter(slug=document.get("tenant")).first()

    def _unstored_item(self, payload: object) -> documents.Item:
        """A trace that is evaluated only: validated, its tenant checked against a key's."""
        item = documents.Item(index=0, id=None)
        item.errors = documents.validate(payload)
        if item.errors:
            return item
        assert isinstance(payload, dict)
        key = self.caller.key
        document = dict(payload)
        if key is not None and key.tenant is not None:
            if document.get("tenant") not in (None, key.tenant.slug):
                raise TenantDenied(f"this API key acts for tenant {key.tenant.slug!r} only")
            document["tenant"] = key.tenant.slug
        item.errors = documents.size_issues(orjson.dumps(document, option=orjson.OPT_SORT_KEYS))
        item.document = None if item.errors else document
        return item


def answered(result: Result) -> dict[str, Any]:
    """A result as the verdict answers it: a skipped one says why (`skipReason`)."""
    shown = result.as_dict()
    if result.status == "skipped":
        shown["skipReason"] = result.details.get("skip")
    return shown


def halted_by(verdict: TurnVerdict) -> str | None:
    """The first guardrail whose failure halts the turn (a `halt` not in shadow), or the one
    that failed closed on an `error` (reason guardrail-error)."""
    if verdict.error is not None:
        return verdict.error["guardrail"]
    for result in verdict.results:
        if result.status == "fail" and result.action == "halt" and not result.details.get("shadow"):
            return result.guardrail
    return None


def count_verdict(verdict: TurnVerdict, stage: str, seconds: float) -> None:
    """The verdict and each of its evaluations, in the console's metrics."""
    erred = any(result.status == "error" for result in verdict.results)
    instruments.count_verdict(stage, verdict.turn, erred, seconds)
    instruments.count_evaluations(((result.guardrail, result.status) for result in verdict.results), "runtime")
