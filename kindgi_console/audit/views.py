"""The audit log page: a tenant's admins read their tenants' entries, superusers all of them.

Filtered by the same `AuditFilter` as `GET audit` (its page subclass, in the filter bar),
newest first with a cursor, and exportable as CSV (`?format=csv`, streamed, with the same
filters).
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterator
from typing import Any

from django.db.models import QuerySet
from django.http import HttpRequest, StreamingHttpResponse
from django.http.response import HttpResponseBase
from django.shortcuts import render
from django.views import View

from kindgi_console.audit.filters import AuditPageFilter
from kindgi_console.audit.models import AuditEntry
from kindgi_console.paging import keyset_page
from kindgi_console.tenancy.admin_pages import AdminPageMixin

CSV_COLUMNS = ["created_at", "tenant", "actor", "action", "object_type", "object_id", "object", "changes"]


class AuditLogView(AdminPageMixin, View):
    template_name = "audit/audit_list.html"

    def entries(self) -> QuerySet[AuditEntry]:
        rows = AuditEntry.objects.select_related("tenant")
        if self.request.user.is_superuser:
            return rows
        return rows.filter(tenant__in=self.tenants)

    def get(self, request: HttpRequest) -> HttpResponseBase:
        everyone = "all (and the console's)" if request.user.is_superuser else "all of mine"
        tenants = [("", everyone), *((t.slug, t.slug) for t in self.tenants)]
        filterset = AuditPageFilter(request.GET, queryset=self.entries(), tenants=tenants)
        valid = filterset.is_valid()
        rows = filterset.qs if valid else self.entries().none()
        if request.GET.get("format") == "csv":
            return csv_response(rows)
        page = keyset_page(request, rows, "created_at")
        query = request.GET.copy()
        query.pop("after", None)
        query.pop("before", None)
        query["format"] = "csv"
        context = {
            "page": page,
            "form": filterset.form,
            "csv_url": f"{request.path}?{query.urlencode()}",
            "nav_active": "audit",
        }
        return render(request, self.template_name, context, status=200 if valid else 400)


class _Echo:
    def write(self, value: str) -> str:
        return value


def cell(value: str) -> str:
    """A cell a spreadsheet will not run: text starting like a formula gets a quote first."""
    return "'" + value if value[:1] in ("=", "+", "-", "@", "\t", "\r") else value


def csv_rows(entries: QuerySet[AuditEntry]) -> Iterator[list[Any]]:
    yield CSV_COLUMNS
    for e in entries.order_by("-created_at", "-pk").iterator(chunk_size=2000):
        row = [
            e.created_at.isoformat(),
            e.tenant.slug if e.tenant else "",
            e.actor,
            e.action,
            e.object_type,
            e.object_id,
            e.object_repr,
            json.dumps(e.changes, sort_keys=True),
        ]
        yield [cell(value) for value in row]


def csv_response(entries: QuerySet[AuditEntry]) -> StreamingHttpResponse:
    writer = csv.writer(_Echo())
    response = StreamingHttpResponse(
        (writer.writerow(row) for row in csv_rows(entries)), content_type="text/csv; charset=utf-8"
    )
    response["Content-Disposition"] = 'attachment; filename="audit-log.csv"'
    return response
