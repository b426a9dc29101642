"""REST endpoints of the judge cost ledger: its entries (JSON pages or one CSV) and its sums."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from django.http import StreamingHttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.request import Request
from rest_framework.response import Response

from guardrails.engine.types import Issue
from kindgi_console.api import ApiError, ConsoleAPIView
from kindgi_console.openapi import error_responses, filter_parameters
from traces.judge import ledger
from traces.ledger import serializers
from traces.models import JudgeLedgerEntry, LedgerDay
from traces.store import filters


class LedgerEntryListView(ConsoleAPIView):
    """`GET ledger/entries`: each judge call, newest first (`ledger/entries.csv`: all, as CSV)."""

    serializer_class = serializers.LedgerEntrySerializer
    filterset_class = filters.LedgerFilter
    queryset = JudgeLedgerEntry.objects.all()

    @extend_schema(
        operation_id="ledger_entries_list",
        responses={200: serializers.LedgerEntrySerializer(many=True), **error_responses(400, 401, 403)},
    )
    def get(self, request: Request) -> Any:
        entries = self.filter_queryset(self.get_queryset())
        page = self.paginate_queryset(ledger.entries_for_listing(entries))
        assert page is not None  # the keyset pagination always pages
        return self.get_paginated_response([ledger.entry_dict(entry) for entry in page])


class LedgerCsvView(LedgerEntryListView):
    """`GET ledger/entries.csv`: every entry of the filtered view as a streamed CSV file
    (the filters of `ledger/entries`, no pagination; memory stays flat)."""

    @extend_schema(
        operation_id="ledger_entries_csv",
        responses={(200, "text/csv"): OpenApiTypes.STR, **error_responses(400, 401, 403)},
    )
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
        parameters=[
            OpenApiParameter(
                "group_by",
                str,
                many=True,
                explode=True,
                enum=list(ledger.GROUPS),
                description="Any of guardrail, tenant, model, day: repeated "
                "(group_by=model&group_by=day) or comma-separated (group_by=model,day).",
            ),
            *filter_parameters(filters.LedgerFilter),
        ],
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
            LedgerDay.objects.for_caller(self.caller), filters.LedgerFilter(request.query_params, queryset=entries)
        )
        return Response({"groupBy": group_by, "groups": ledger.summarise(entries, group_by, days)})
