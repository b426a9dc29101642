"""REST endpoints of violations: the list, one with its review history, reviewing, and
claiming one (and releasing it)."""

from __future__ import annotations

from typing import Any

from django.db.models import F, Prefetch, QuerySet, Value
from django.db.models.functions import Coalesce, NullIf
from django.http import Http404
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework.request import Request
from rest_framework.response import Response

from guardrails.engine.types import Issue
from kindgi_console.api import ApiError, ConsoleAPIView, object_body, read_json_body
from kindgi_console.openapi import error_responses
from kindgi_console.tenancy.scoping import Caller
from traces.models import Violation, ViolationReview
from traces.review import claims, serializers, workflow
from traces.review.serializers import BULK_REVIEW_BODY, CLAIM, REVIEW_BODY, REVIEW_OUTCOME
from traces.store import filters


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

    @extend_schema(
        operation_id="violations_list",
        responses={200: serializers.ViolationSerializer(many=True), **error_responses(400, 401, 403)},
    )
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

    @extend_schema(
        operation_id="violations_read",
        responses={200: serializers.ViolationDetailSerializer, **error_responses(401, 403, 404)},
    )
    def get(self, request: Request, pk: int) -> Response:
        violation = self.get_queryset().filter(pk=pk).first()
        if violation is None:
            raise Http404
        return Response(self.get_serializer(violation).data)


class ViolationReviewView(ConsoleAPIView):
    """`POST violations/{id}/review`: move one violation to another review state, with a note.

    Needs the `review` scope (a key) or a role in the violation's tenant (a user). A move
    its state does not allow is 400 naming `/state`; a violation the caller cannot see, 404.
    """

    scopes = {"POST": "review"}
    filter_backends: list[Any] = []

    @extend_schema(
        operation_id="violations_review",
        request=REVIEW_BODY,
        responses={200: OpenApiResponse(REVIEW_OUTCOME), **error_responses(400, 401, 403, 404, 415)},
    )
    def post(self, request: Request, pk: int) -> Response:
        body = object_body(read_json_body(request), {"state", "note"}, "the body is a JSON object")
        state, note = _checked(body)
        try:
            outcome = workflow.review_one(pk, state, note, self.caller)
        except Violation.DoesNotExist:
            raise Http404 from None
        return Response(outcome.as_dict())


class ViolationBulkReviewView(ConsoleAPIView):
    """`POST violations/review`: review a selection, by ids or by the filters of the list.

    Each violation whose state allows the move is moved; the others are listed in
    `refused` with the reason. Violations the caller cannot review are never selected.
    """

    scopes = {"POST": "review"}
    filter_backends: list[Any] = []

    @extend_schema(
        operation_id="violations_review_bulk",
        request=BULK_REVIEW_BODY,
        responses={200: OpenApiResponse(REVIEW_OUTCOME), **error_responses(400, 401, 403, 415)},
    )
    def post(self, request: Request) -> Response:
        body = object_body(read_json_body(request), {"ids", "filter", "state", "note"}, "the body is a JSON object")
        state, note = _checked(body)
        selection = bulk_selection(workflow.reviewable(self.caller), body, self.caller)
        outcome = workflow.review(selection, state, note, self.caller)
        return Response(outcome.as_dict())


class ViolationClaimView(ConsoleAPIView):
    """`POST violations/{id}/claim`: take the violation, so that other reviewers see that it
    is handled (`traces.review.claims`). Claiming one's own again changes nothing; one that
    someone else holds, or a closed one, is 409 saying who holds it and since when."""

    scopes = {"POST": "review"}
    filter_backends: list[Any] = []
    pagination_class = None

    @extend_schema(
        operation_id="violations_claim",
        request=None,
        responses={200: OpenApiResponse(CLAIM), **error_responses(401, 403, 404, 409)},
    )
    def post(self, request: Request, pk: int) -> Response:
        try:
            return Response(claims.claim(pk, self.caller).as_dict())
        except Violation.DoesNotExist:
            raise Http404 from None


class ViolationUnclaimView(ConsoleAPIView):
    """`POST violations/{id}/unclaim`: release the violation (its holder, or an admin of the
    tenant); another's claim is 409 naming who holds it. Releasing an unclaimed one changes nothing."""

    scopes = {"POST": "review"}
    filter_backends: list[Any] = []
    pagination_class = None

    @extend_schema(
        operation_id="violations_unclaim",
        request=None,
        responses={200: OpenApiResponse(CLAIM), **error_responses(401, 403, 404, 409)},
    )
    def post(self, request: Request, pk: int) -> Response:
        try:
            return Response(claims.unclaim(pk, self.caller).as_dict())
        except Violation.DoesNotExist:
            raise Http404 from None


def _checked(body: dict[str, Any]) -> tuple[str, str]:
    return workflow.check_request(body.get("state"), body.get("note"))


def bulk_selection(
    violations: QuerySet[Violation], body: dict[str, Any], caller: Caller | None = None
) -> QuerySet[Violation]:
    """The violations a bulk review names: `ids`, or `filter` (the list's filters)."""
    if ("ids" in body) == ("filter" in body):
        raise ApiError([Issue("", "give either `ids` or `filter`")])
    if "ids" in body:
        ids = body["ids"]
        if (
            not isinstance(ids, list)
            or not ids
            or not all(isinstance(pk, int) and not isinstance(pk, bool) for pk in ids)
        ):
            raise ApiError([Issue("/ids", "ids is a non-empty array of violation ids")])
        if len(ids) > workflow.MAX_BULK:
            raise ApiError([Issue("/ids", f"at most {workflow.MAX_BULK} ids")])
        return violations.filter(pk__in=ids)
    return filtered_violations(violations, body["filter"], base="/filter", caller=caller)


def filtered_violations(
    violations: QuerySet[Violation], data: object, *, base: str = "", caller: Caller | None = None
) -> QuerySet[Violation]:
    """`violations` narrowed by the filters of `GET violations` (`assignee=me`: `caller`'s);
    ApiError naming a bad one."""
    if not isinstance(data, dict):
        raise ApiError([Issue(base, "the filter is an object of the list's filters")])
    names = set(filters.ViolationFilter.base_filters)
    unknown = sorted(set(data) - names)
    if unknown:
        raise ApiError([Issue(f"{base}/{unknown[0]}", "unknown filter; use " + ", ".join(sorted(names)))])
    if not all(isinstance(value, str) for value in data.values()):
        bad = next(name for name, value in data.items() if not isinstance(value, str))
        raise ApiError([Issue(f"{base}/{bad}", "a filter value is a string")])
    filterset = filters.ViolationFilter(data=data, queryset=violations, caller=caller)
    if not filterset.is_valid():
        name, messages = next(iter(filterset.errors.items()))
        raise ApiError([Issue(f"{base}/{name}", str(messages[0]))])
    return filterset.qs
