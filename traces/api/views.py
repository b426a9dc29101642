"""REST endpoints of traces, the runtime verdict, violations and the judge cost ledger."""

from __future__ import annotations

import time
from typing import Any

import orjson
from django.conf import settings
from django.db.models import F, Prefetch, QuerySet, Value
from django.db.models.functions import Coalesce, NullIf
from django.http import Http404, StreamingHttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response

from guardrails.engine.types import Issue
from guardrails.services import enforced_guardrails
from kindgi_console.api import ApiError, ConsoleAPIView, read_json_body
from kindgi_console.openapi import ERRORS_SCHEMA, error_responses, filter_parameters, ref
from kindgi_console.renderers import ORJSONRenderer
from kindgi_console.tenancy.scoping import TenantDenied
from traces import ingest, ledger, review
from traces.api import filters, serializers
from traces.judge.services import evaluation_services
from traces.models import (
    EvaluationResult,
    JudgeLedgerEntry,
    LedgerDay,
    RunTrace,
    Violation,
    ViolationReview,
)
from traces.services import enforced_now, queue_runtime_evaluation, runtime_verdict
from traces.verdicts import store_verdict

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
    renderer_classes = [ORJSONRenderer]

    @extend_schema(
        request=VERDICT_BODY,
        parameters=[OpenApiParameter("store", OpenApiTypes.BOOL, description="false: store "
                                     "nothing, only answer the verdict (default true).")],
        responses={200: OpenApiResponse(VERDICT_SCHEMA), **error_responses(400, 401, 403, 413,
                                                                           415, 429)},
    )
    def post(self, request: Request) -> Response:
        # The whole evaluation is done by this instant (judge calls get what is left of it).
        deadline = time.monotonic() + settings.KINDGI_EVALUATE_TIME_LIMIT_S
        storing = self._store_flag(request)
        payload = read_json_body(request)
        item = ingest.prepare(self.caller, payload, 0, scope="evaluate") if storing else (
            self._unstored_item(payload)
        )
        if item.errors:
            raise ApiError(item.errors)
        assert item.document is not None
        enforced = enforced_now(item.tenant or self._named_tenant(item.document))
        with evaluation_services(item.tenant, until=deadline) as services:
            verdict = runtime_verdict(item.document, enforced, services, deadline=deadline)
        answer: dict[str, Any] = {
            "turn": verdict.turn,
            "reason": verdict.reason,
            "results": [result.as_dict() for result in verdict.results],
        }
        if storing:
            if verdict.withheld:
                ingest.withhold_output(item)
            store_verdict(item, verdict.results, enforced, services.judge)
            answer["trace"] = item.as_dict()
        return Response(answer)

    @staticmethod
    def _store_flag(request: Request) -> bool:
        raw = request.query_params.get("store", "true").lower()
        if raw not in ("true", "false", "1", "0"):
            raise ApiError([Issue("/store", "store is true or false")])
        return raw in ("true", "1")

    def _named_tenant(self, document: dict[str, Any]) -> Any:
        """The tenant an unstored trace names, if the caller reads it (whose guardrails apply)."""
        return self.caller.tenants("read").filter(slug=document.get("tenant")).first()

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
        item.errors = ingest.size_issues(orjson.dumps(document, option=orjson.OPT_SORT_KEYS))
        item.document = None if item.errors else document
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
        reviewer=Coalesce(NullIf(F("reviewed_by_label"), Value("")), F("reviewed_by__username")),
    )

    @extend_schema(operation_id="violations_list", responses={
        200: serializers.ViolationSerializer(many=True), **error_responses(400, 401, 403)})
    def get(self, request: Request) -> Response:
        page = self.paginate_queryset(self.filter_queryset(self.get_queryset()))
        return self.get_paginated_response(self.get_serializer(page, many=True).data)


class ViolationDetailView(ConsoleAPIView):
    """`GET violations/{id}`: one violation with its review history, oldest change first."""

    serializer_class = serializers.ViolationDetailSerializer
    queryset = ViolationListView.queryset.prefetch_related(
        Prefetch("reviews", queryset=ViolationReview.objects.order_by("created_at", "pk"))
    )
    filter_backends: list[Any] = []

    @extend_schema(operation_id="violations_read", responses={
        200: serializers.ViolationDetailSerializer, **error_responses(401, 403, 404)})
    def get(self, request: Request, pk: int) -> Response:
        violation = self.get_queryset().filter(pk=pk).first()
        if violation is None:
            raise Http404
        return Response(self.get_serializer(violation).data)


REVIEW_BODY = {"application/json": {
    "type": "object",
    "required": ["state"],
    "properties": {
        "state": {"type": "string", "enum": list(review.STATES)},
        "note": {"type": "string", "maxLength": review.MAX_NOTE},
    },
}}
REVIEW_OUTCOME = {
    "type": "object",
    "required": ["state", "reviewed", "refused"],
    "properties": {
        "state": {"type": "string"},
        "reviewed": {"type": "array", "items": {"type": "integer"}},
        "refused": {"type": "array", "items": {
            "type": "object", "properties": {"id": {"type": "integer"},
                                             "message": {"type": "string"}}}},
    },
}


class ViolationReviewView(ConsoleAPIView):
    """`POST violations/{id}/review`: move one violation to another review state, with a note.

    Needs the `review` scope (a key) or a role in the violation's tenant (a user). A move
    its state does not allow is 400 naming `/state`; a violation the caller cannot see, 404.
    """

    scopes = {"POST": "review"}
    filter_backends: list[Any] = []

    @extend_schema(operation_id="violations_review", request=REVIEW_BODY, responses={
        200: OpenApiResponse(REVIEW_OUTCOME), **error_responses(400, 401, 403, 404, 415)})
    def post(self, request: Request, pk: int) -> Response:
        body = _review_body(read_json_body(request), {"state", "note"})
        state, note = _checked(body)
        try:
            outcome = review.review_one(pk, state, note, self.caller)
        except review.ReviewError as error:
            raise ApiError(error.issues) from None
        except Violation.DoesNotExist:
            raise Http404 from None
        return Response(outcome.as_dict())


BULK_REVIEW_BODY = {"application/json": {
    "type": "object",
    "required": ["state"],
    "description": "`ids` (violation ids) or `filter` (the filters of GET violations), not both.",
    "properties": {
        "ids": {"type": "array", "items": {"type": "integer"}},
        "filter": {"type": "object", "additionalProperties": {"type": "string"}},
        "state": {"type": "string", "enum": list(review.STATES)},
        "note": {"type": "string", "maxLength": review.MAX_NOTE},
    },
}}


class ViolationBulkReviewView(ConsoleAPIView):
    """`POST violations/review`: review a selection, by ids or by the filters of the list.

    Each violation whose state allows the move is moved; the others are listed in
    `refused` with the reason. Violations the caller cannot review are never selected.
    """

    scopes = {"POST": "review"}
    filter_backends: list[Any] = []

    @extend_schema(operation_id="violations_review_bulk", request=BULK_REVIEW_BODY, responses={
        200: OpenApiResponse(REVIEW_OUTCOME), **error_responses(400, 401, 403, 415)})
    def post(self, request: Request) -> Response:
        body = _review_body(read_json_body(request), {"ids", "filter", "state", "note"})
        state, note = _checked(body)
        selection = bulk_selection(review.reviewable(self.caller), body)
        try:
            outcome = review.review(selection, state, note, self.caller)
        except review.ReviewError as error:
            raise ApiError(error.issues) from None
        return Response(outcome.as_dict())


def _review_body(body: object, fields: set[str]) -> dict[str, Any]:
    if not isinstance(body, dict):
        raise ApiError([Issue("", "the body is a JSON object")])
    extra = sorted(set(body) - fields)
    if extra:
        raise ApiError([Issue(f"/{extra[0]}", f"unknown field; use {', '.join(sorted(fields))}")])
    return body


def _checked(body: dict[str, Any]) -> tuple[str, str]:
    try:
        return review.check_request(body.get("state"), body.get("note"))
    except review.ReviewError as error:
        raise ApiError(error.issues) from None


def bulk_selection(violations: QuerySet[Violation], body: dict[str, Any]) -> QuerySet[Violation]:
    """The violations a bulk review names: `ids`, or `filter` (the list's filters)."""
    if ("ids" in body) == ("filter" in body):
        raise ApiError([Issue("", "give either `ids` or `filter`")])
    if "ids" in body:
        ids = body["ids"]
        if not isinstance(ids, list) or not ids or not all(
            isinstance(pk, int) and not isinstance(pk, bool) for pk in ids
        ):
            raise ApiError([Issue("/ids", "ids is a non-empty array of violation ids")])
        if len(ids) > review.MAX_BULK:
            raise ApiError([Issue("/ids", f"at most {review.MAX_BULK} ids")])
        return violations.filter(pk__in=ids)
    return filtered_violations(violations, body["filter"], base="/filter")


def filtered_violations(
    violations: QuerySet[Violation], data: object, *, base: str = ""
) -> QuerySet[Violation]:
    """`violations` narrowed by the filters of `GET violations`; ApiError naming a bad one."""
    if not isinstance(data, dict):
        raise ApiError([Issue(base, "the filter is an object of the list's filters")])
    names = set(filters.ViolationFilter.base_filters)
    unknown = sorted(set(data) - names)
    if unknown:
        raise ApiError([Issue(f"{base}/{unknown[0]}", "unknown filter; use "
                                                      + ", ".join(sorted(names)))])
    if not all(isinstance(value, str) for value in data.values()):
        bad = next(name for name, value in data.items() if not isinstance(value, str))
        raise ApiError([Issue(f"{base}/{bad}", "a filter value is a string")])
    filterset = filters.ViolationFilter(data=data, queryset=violations)
    if not filterset.is_valid():
        name, messages = next(iter(filterset.errors.items()))
        raise ApiError([Issue(f"{base}/{name}", str(messages[0]))])
    return filterset.qs


class LedgerEntryListView(ConsoleAPIView):
    """`GET ledger/entries`: each judge call, newest first (`ledger/entries.csv`: all, as CSV)."""

    serializer_class = serializers.LedgerEntrySerializer
    filterset_class = filters.LedgerFilter
    queryset = JudgeLedgerEntry.objects.all()

    @extend_schema(operation_id="ledger_entries_list", responses={
        200: serializers.LedgerEntrySerializer(many=True), **error_responses(400, 401, 403)})
    def get(self, request: Request) -> Any:
        entries = self.filter_queryset(self.get_queryset())
        page = self.paginate_queryset(ledger.entries_for_listing(entries))
        return self.get_paginated_response([ledger.entry_dict(entry) for entry in page])


class LedgerCsvView(LedgerEntryListView):
    """`GET ledger/entries.csv`: every entry of the filtered view as a streamed CSV file
    (the filters of `ledger/entries`, no pagination; memory stays flat)."""

    @extend_schema(operation_id="ledger_entries_csv", responses={
        (200, "text/csv"): OpenApiTypes.STR, **error_responses(400, 401, 403)})
    def get(self, request: Request) -> Any:
        return ledger_csv_response(self.filter_queryset(self.get_queryset()))


def ledger_csv_response(entries: QuerySet[JudgeLedgerEntry]) -> StreamingHttpResponse:
    response = StreamingHttpResponse(ledger.csv_lines(entries), content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = 'attachment; filename="judge-ledger.csv"'
    return response


class LedgerSummaryView(ConsoleAPIView):
    """`GET ledger`: the judge cost ledger summed by guardrail, tenant, model and/or day."""

    filterset_class = filters.LedgerFilter
    queryset = JudgeLedgerEntry.objects.all()
    pagination_class = None

    @extend_schema(
        operation_id="ledger_summary",
        parameters=[OpenApiParameter(
            "group_by", str, many=True, explode=True, enum=list(ledger.GROUPS),
            description="Any of guardrail, tenant, model, day: repeated "
            "(group_by=model&group_by=day) or comma-separated (group_by=model,day).",
        ), *filter_parameters(filters.LedgerFilter)],
        responses={200: serializers.LedgerSummarySerializer, **error_responses(400, 401, 403)},
    )
    def get(self, request: Request) -> Response:
        try:
            group_by = ledger.parse_group_by(request.query_params.getlist("group_by"))
        except ledger.UnknownGrouping as error:
            raise ApiError([Issue("/group_by", str(error))]) from None
        entries = self.filter_queryset(self.get_queryset())
        # Filters on whole days (or none) are answered from the daily roll-up.
        days = filters.ledger_days(
            LedgerDay.objects.for_caller(self.caller),
            filters.LedgerFilter(request.query_params, queryset=entries),
        )
        return Response({"groupBy": group_by, "groups": ledger.summarise(entries, group_by, days)})


ESTIMATE_SCHEMA = {
    "type": "object",
    "required": ["calls", "cached", "costUsd", "traces", "sampled", "extrapolated", "models",
                 "errors"],
    "properties": {
        "tenant": {"type": "string"},
        "calls": {"type": "integer", "description": "Judge calls to pay (cache hits left out)."},
        "cached": {"type": "integer", "description": "Judgements the cache will answer."},
        "costUsd": {"type": "string", "description": "Upper estimate, exact decimal string."},
        "traces": {"type": "integer"},
        "sampled": {"type": "integer", "description": "Traces read to estimate."},
        "extrapolated": {"type": "boolean",
                         "description": "True when the selection was larger than the sample."},
        "models": {"type": "object", "additionalProperties": {"type": "string"},
                   "description": "Guardrail id -> the judge model it routes to."},
        "errors": {"type": "object", "additionalProperties": {"type": "string"},
                   "description": "Guardrail id -> why no judge model fits."},
    },
}


class EvaluationEstimateView(ConsoleAPIView):
    """`GET evaluations/estimate`: what a batch run would ask judges, before it starts.

    `guardrails` (comma-separated ids; none: every enabled one) over the traces that
    `agent`, `flow`, `since`, `until` select in `tenant` (optional for a caller of one tenant;
    404 for a tenant the caller may not read). An id of no enabled guardrail is named in
    the answer's `errors`.
    """

    queryset = RunTrace.objects.all()
    filterset_class = filters.TraceFilter
    pagination_class = None

    @extend_schema(
        operation_id="evaluations_estimate",
        parameters=[OpenApiParameter("guardrails", str, description="Comma-separated ids."),
                    *filter_parameters(filters.TraceFilter)],
        responses={200: OpenApiResponse(ESTIMATE_SCHEMA), **error_responses(400, 401, 403, 404)},
    )
    def get(self, request: Request) -> Response:
        from traces.judge.estimate import estimate_run

        traces = self.filter_queryset(self.get_queryset())
        tenant = self._tenant(request)
        guardrails, unknown = self._guardrails(request, tenant)
        estimate = estimate_run(guardrails, traces.filter(tenant=tenant), tenant)
        for name in unknown:  # said in the answer, like a guardrail without a judge
            estimate["errors"][name] = "no enabled guardrail has this id"
        return Response({"tenant": tenant.slug, **estimate})

    def _tenant(self, request: Request) -> Any:

        visible = self.caller.tenants("read")
        slug = request.query_params.get("tenant")
        if slug:
            visible = visible.filter(slug=slug)
        found = list(visible[:2])
        if len(found) == 1:
            return found[0]
        if not found:  # a tenant the caller may not read is not there, as everywhere
            raise Http404
        raise ApiError([Issue("/tenant", "name the tenant to estimate for with ?tenant=")])

    @staticmethod
    def _guardrails(request: Request, tenant: Any) -> tuple[list[Any], list[str]]:
        """The enabled guardrails named (all when none is), and the names of no such one."""
        wanted = [name.strip() for name in request.query_params.get("guardrails", "").split(",")
                  if name.strip()]
        enforced = {item.guardrail.id: item.guardrail for item in enforced_guardrails(tenant)}
        if not wanted:
            return list(enforced.values()), []
        known = [enforced[name] for name in dict.fromkeys(wanted) if name in enforced]
        return known, [name for name in dict.fromkeys(wanted) if name not in enforced]
