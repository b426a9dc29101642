"""REST endpoints of traces, the runtime verdict, violations and the judge cost ledger."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db.models import Count, F, Prefetch, Q, QuerySet, Sum
from django.db.models.functions import TruncDate
from django.http import Http404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response

from guardrails.engine.types import Issue
from guardrails.services import enforced_guardrails
from kindgi_console.api import ApiError, ConsoleAPIView, read_json_body
from kindgi_console.openapi import ref
from kindgi_console.tenancy.scoping import TenantDenied
from traces import ingest
from traces.api import filters, serializers
from traces.models import EvaluationResult, JudgeLedgerEntry, RunTrace, Violation
from traces.services import queue_runtime_evaluation, record_results, runtime_verdict

ERRORS_SCHEMA = {
    "type": "object",
    "required": ["errors"],
    "properties": {
        "errors": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["path", "message"],
                "properties": {"path": {"type": "string"}, "message": {"type": "string"}},
            },
        }
    },
}
ITEM_SCHEMA = {
    "type": "object",
    "required": ["index", "id", "status", "errors"],
    "properties": {
        "index": {"type": "integer"},
        "id": {"type": "string", "nullable": True},
        "status": {"type": "string", "enum": ["created", "duplicate", "conflict", "invalid"]},
        "errors": ERRORS_SCHEMA["properties"]["errors"],  # type: ignore[index]
    },
}
BATCH_SCHEMA = {
    "type": "object",
    "required": ["results"],
    "properties": {"results": {"type": "array", "items": ITEM_SCHEMA}},
}
TRACE_BODY = {"application/json": {
    "description": 'One RunTrace, or a batch: {"traces": [RunTrace, ...]}.',
    "oneOf": [
        ref("RunTrace"),
        {
            "type": "object",
            "required": ["traces"],
            "additionalProperties": False,
            "properties": {"traces": {
                "type": "array",
                "description": "RunTraces; each one stands alone: an invalid one is reported "
                "in its result and the others are stored.",
                "items": {},
            }},
        },
    ],
}}
VERDICT_BODY = {"application/json": ref("RunTrace")}


def error_responses(*codes: int) -> dict[int, OpenApiResponse]:
    return {code: OpenApiResponse(ERRORS_SCHEMA) for code in codes}


class TraceListView(ConsoleAPIView):
    """`GET traces` lists the caller's tenants' traces; `POST traces` ingests."""

    queryset = RunTrace.objects.select_related("tenant").defer("document")
    serializer_class = serializers.TraceSummarySerializer
    filterset_class = filters.TraceFilter
    scopes = {"GET": "read", "POST": "ingest"}
    ordering_field = "received_at"

    @extend_schema(operation_id="traces_list", responses={
        200: serializers.TraceSummarySerializer(many=True), **error_responses(400, 401, 403)})
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
        },
    )
    def post(self, request: Request) -> Response:
        payload = read_json_body(request)
        if isinstance(payload, dict) and "traces" in payload and "id" not in payload:
            return self._ingest_batch(payload)
        item = ingest.prepare(self.caller, payload, 0)
        ingest.store([item], on_created=queue_runtime_evaluation)
        return Response(item.as_dict(), status=SINGLE_STATUS[item.status])

    def _ingest_batch(self, payload: dict[str, Any]) -> Response:
        documents = payload["traces"]
        extra = sorted(set(payload) - {"traces"})
        if extra:
            raise ApiError([Issue(f"/{extra[0]}", "a batch has only the field `traces`")])
        if not isinstance(documents, list):
            raise ApiError([Issue("/traces", "`traces` is an array of RunTraces")])
        if len(documents) > settings.KINDGI_MAX_BATCH:
            raise ApiError([Issue("/traces", f"a batch holds at most {settings.KINDGI_MAX_BATCH} "
                                             f"traces, not {len(documents)}: nothing was stored")])
        items = ingest.prepare_all(self.caller, documents)
        ingest.store(items, on_created=queue_runtime_evaluation)
        return Response({"results": [item.as_dict() for item in items]}, status=207)


SINGLE_STATUS = {
    ingest.CREATED: status.HTTP_201_CREATED,
    ingest.DUPLICATE: status.HTTP_200_OK,
    ingest.CONFLICT: status.HTTP_409_CONFLICT,
    ingest.INVALID: status.HTTP_400_BAD_REQUEST,
}


class TraceDetailView(ConsoleAPIView):
    """`GET traces/{id}`: a trace by the runtime's id, with its results."""

    serializer_class = serializers.TraceDetailSerializer
    queryset = RunTrace.objects.select_related("tenant").prefetch_related(
        Prefetch(
            "results",
            queryset=EvaluationResult.objects.select_related("guardrail", "revision").order_by("id"),
        )
    )

    @extend_schema(
        operation_id="traces_read",
        parameters=[OpenApiParameter("tenant", str, description="The tenant, when several "
                                     "of the caller's tenants have a trace with this id.")],
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
            raise ApiError([Issue("/tenant", "several of your tenants have a trace with this "
                                             "id: name one with ?tenant=")])
        return Response(self.get_serializer(found[0]).data)


VERDICT_SCHEMA = {
    "type": "object",
    "required": ["turn", "reason", "results"],
    "properties": {
        "turn": {"type": "string", "enum": ["completed", "failed"]},
        "reason": {"type": "string", "nullable": True, "enum": ["guardrail-violation", None]},
        "results": {"type": "array", "items": {"type": "object"}},
        "trace": ITEM_SCHEMA,
    },
}


class EvaluateView(ConsoleAPIView):
    """`POST evaluate`: the runtime verdict, stored with its results unless ?store=false."""

    scopes = {"POST": "evaluate"}
    filter_backends: list[Any] = []

    @extend_schema(
        request=VERDICT_BODY,
        parameters=[OpenApiParameter("store", OpenApiTypes.BOOL, description="false: store "
                                     "nothing, only answer the verdict (default true).")],
        responses={200: OpenApiResponse(VERDICT_SCHEMA), **error_responses(400, 401, 403, 413,
                                                                           415, 429)},
    )
    def post(self, request: Request) -> Response:
        storing = self._store_flag(request)
        payload = read_json_body(request)
        item = ingest.prepare(self.caller, payload, 0, scope="evaluate") if storing else (
            self._unstored_item(payload)
        )
        if item.errors:
            raise ApiError(item.errors)
        assert item.document is not None
        enforced = enforced_guardrails()
        verdict = runtime_verdict(item.document, enforced)
        answer: dict[str, Any] = {
            "turn": verdict.turn,
            "reason": verdict.reason,
            "results": [result.as_dict() for result in verdict.results],
        }
        if storing:
            if verdict.withheld:
                ingest.withhold_output(item)
            ingest.store([item])
            if item.row_id is not None and item.status != ingest.CONFLICT:
                trace = RunTrace(pk=item.row_id, tenant=item.tenant, agent=item.document.get(
                    "agent") or "", flow=item.document.get("flow") or "")
                record_results([(trace, verdict.results)], enforced, mode="runtime")
            answer["trace"] = item.as_dict()
        return Response(answer)

    @staticmethod
    def _store_flag(request: Request) -> bool:
        raw = request.query_params.get("store", "true").lower()
        if raw not in ("true", "false", "1", "0"):
            raise ApiError([Issue("/store", "store is true or false")])
        return raw in ("true", "1")

    def _unstored_item(self, payload: object) -> ingest.Item:
        """A trace that is evaluated only: validated, its tenant checked against a key's."""
        item = ingest.Item(index=0, id=None)
        item.errors = ingest.validate(payload)
        if item.errors:
            return item
        assert isinstance(payload, dict)
        key = self.caller.key
        document = dict(payload)
        if key is not None and key.tenant is not None:
            if document.get("tenant") not in (None, key.tenant.slug):
                raise TenantDenied(f"this API key acts for tenant {key.tenant.slug!r} only")
            document["tenant"] = key.tenant.slug
        item.document = document
        return item


class ViolationListView(ConsoleAPIView):
    """`GET violations`: the caller's tenants' violation history, newest first."""

    serializer_class = serializers.ViolationSerializer
    filterset_class = filters.ViolationFilter
    queryset = Violation.objects.annotate(
        tenant_slug=F("tenant__slug"),
        trace_ref=F("trace__trace_id"),
        guardrail_ref=F("guardrail__guardrail_id"),
        revision_number=F("revision__number"),
        reviewer=F("reviewed_by__username"),
    )

    @extend_schema(operation_id="violations_list", responses={
        200: serializers.ViolationSerializer(many=True), **error_responses(400, 401, 403)})
    def get(self, request: Request) -> Response:
        page = self.paginate_queryset(self.filter_queryset(self.get_queryset()))
        return self.get_paginated_response(self.get_serializer(page, many=True).data)


def ledger_entries() -> QuerySet[JudgeLedgerEntry]:
    return JudgeLedgerEntry.objects.annotate(
        tenant_slug=F("tenant__slug"),
        guardrail_ref=F("guardrail__guardrail_id"),
        revision_number=F("revision__number"),
        trace_ref=F("trace__trace_id"),
    )


class LedgerEntryListView(ConsoleAPIView):
    """`GET ledger/entries`: each judge call, newest first."""

    serializer_class = serializers.LedgerEntrySerializer
    filterset_class = filters.LedgerFilter
    queryset = ledger_entries()

    @extend_schema(operation_id="ledger_entries_list", responses={
        200: serializers.LedgerEntrySerializer(many=True), **error_responses(400, 401, 403)})
    def get(self, request: Request) -> Response:
        page = self.paginate_queryset(self.filter_queryset(self.get_queryset()))
        return self.get_paginated_response(self.get_serializer(page, many=True).data)


LEDGER_GROUPS = {
    "guardrail": F("guardrail__guardrail_id"),
    "tenant": F("tenant__slug"),
    "model": F("model_id"),
    "day": TruncDate("created_at"),
}


class LedgerSummaryView(ConsoleAPIView):
    """`GET ledger`: the judge cost ledger summed by guardrail, tenant, model and/or day."""

    filterset_class = filters.LedgerFilter
    queryset = JudgeLedgerEntry.objects.all()
    pagination_class = None

    @extend_schema(
        operation_id="ledger_summary",
        parameters=[OpenApiParameter(
            "group_by", str, many=True, explode=True, enum=list(LEDGER_GROUPS),
            description="Any of guardrail, tenant, model, day: repeated "
            "(group_by=model&group_by=day) or comma-separated (group_by=model,day).",
        )],
        responses={200: serializers.LedgerSummarySerializer, **error_responses(400, 401, 403)},
    )
    def get(self, request: Request) -> Response:
        group_by = self._group_by(request)
        entries = self.filter_queryset(self.get_queryset())
        if not group_by:
            return Response({"groupBy": [], "groups": [self._group(entries.aggregate(
                **LEDGER_SUMS), [])]})
        rows = (
            entries.annotate(**{f"g_{name}": LEDGER_GROUPS[name] for name in group_by})
            .values(*[f"g_{name}" for name in group_by])
            .annotate(**LEDGER_SUMS)
            .order_by(*[f"g_{name}" for name in group_by])
        )
        groups = [self._group(row, group_by) for row in rows]
        return Response({"groupBy": group_by, "groups": groups})

    @staticmethod
    def _group_by(request: Request) -> list[str]:
        names = [
            name.strip()
            for value in request.query_params.getlist("group_by")
            for name in value.split(",")
        ]
        unknown = [name for name in names if name not in LEDGER_GROUPS]
        if unknown:
            raise ApiError([Issue("/group_by", f"cannot group by {unknown[0]!r}: use "
                                               "guardrail, tenant, model or day")])
        return list(dict.fromkeys(names))

    @staticmethod
    def _group(row: dict[str, Any], group_by: list[str]) -> dict[str, Any]:
        group = {name: row[f"g_{name}"] for name in group_by}
        if "day" in group and group["day"] is not None:
            group["day"] = group["day"].isoformat()
        group.update(
            calls=row["calls"],
            overBudget=row["over_budget"],
            cacheHits=row["cache_hits"],
            inputTokens=row["input_tokens"] or 0,
            outputTokens=row["output_tokens"] or 0,
            costUsd=str(row["cost_usd"] if row["cost_usd"] is not None else "0"),
        )
        return group


LEDGER_SUMS = {
    "calls": Count("id"),
    "over_budget": Count("id", filter=Q(over_budget_cost=True) | Q(over_budget_latency=True)),
    "cache_hits": Count("id", filter=Q(cache_hit=True)),
    "input_tokens": Sum("input_tokens"),
    "output_tokens": Sum("output_tokens"),
    "cost_usd": Sum("cost_usd"),
}
