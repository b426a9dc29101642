"""`GET /api/v1/audit`: the audit log, newest first, cursor-paginated.

A tenant's admins (and keys with the `audit` scope, bound to a tenant) read that tenant's
entries; superusers read everything, entries of no tenant (console-wide objects) included.
"""

from __future__ import annotations

from typing import Any, cast

from django.db.models import QuerySet
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework.generics import GenericAPIView
from rest_framework.request import Request
from rest_framework.response import Response

from kindgi_console.api import ConsoleAPIView
from kindgi_console.audit.filters import AuditFilter, entry_json
from kindgi_console.audit.models import AuditEntry
from kindgi_console.openapi import error_responses
from kindgi_console.tenancy.scoping import TenantScopedQuerySet


class AuditListView(ConsoleAPIView):
    """`GET audit` (filters `tenant`, `action`, `object_type`, `object_id`, `actor`, `since`, `until`)."""

    queryset = AuditEntry.objects.select_related("tenant")
    filterset_class = AuditFilter
    scopes = {"GET": "audit"}

    def get_queryset(self) -> QuerySet[Any]:
        rows = cast(TenantScopedQuerySet[AuditEntry], GenericAPIView.get_queryset(self))
        return rows.for_caller(self.caller, "audit")

    @extend_schema(
        operation_id="audit_list",
        responses={200: OpenApiResponse(OpenApiTypes.OBJECT), **error_responses(400, 401, 403)},
    )
    def get(self, request: Request) -> Response:
        page = self.paginate_queryset(self.filter_queryset(self.get_queryset())) or []
        return self.get_paginated_response([entry_json(entry) for entry in page])
