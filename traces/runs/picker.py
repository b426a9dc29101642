"""The traces "Try it" offers in the guardrail editor: the current tenant's only, searchable
by id, agent and flow, those that recently failed the guardrail (or, for a guardrail not yet
saved, its check) first."""

from __future__ import annotations

from typing import Any

from django.db.models import Q, QuerySet
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.urls import reverse
from django.utils.http import urlencode
from django.views import View

from kindgi_console.tenancy.scoping import current_rows
from kindgi_console.tenancy.views import TenantScopedMixin
from traces.models import RunTrace, Violation

LIMIT = 20
FAILED_FIRST = 10
MAX_QUERY = 200


class TryTracePickerView(TenantScopedMixin, View):
    """`GET ?q=&guardrail=&check=` -> `{results: [{id, agent, flow, startedAt, url, failed}]}`."""

    model = RunTrace

    def get(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        query = request.GET.get("q", "").strip()[:MAX_QUERY]
        traces = self.searched(self.get_queryset().defer("document"), query)
        failed = list(self.failed(traces, request.GET.get("guardrail", ""), request.GET.get("check", "")))
        seen = {trace.pk for trace in failed}
        newest = [t for t in traces.order_by("-received_at", "-id")[:LIMIT] if t.pk not in seen]
        rows = [self.row(trace, True) for trace in failed] + [self.row(trace, False) for trace in newest]
        return JsonResponse({"results": rows[:LIMIT]})

    @staticmethod
    def searched(traces: QuerySet[RunTrace], query: str) -> QuerySet[RunTrace]:
        if not query:
            return traces
        return traces.filter(Q(trace_id__icontains=query) | Q(agent__icontains=query) | Q(flow__icontains=query))

    def failed(self, traces: QuerySet[RunTrace], guardrail: str, check: str) -> QuerySet[RunTrace]:
        """Traces with a recent violation of the guardrail (by id), else of its check."""
        violations = current_rows(self.request, Violation.objects)
        if guardrail and violations.filter(guardrail__guardrail_id=guardrail).exists():
            violations = violations.filter(guardrail__guardrail_id=guardrail)
        elif check:
            violations = violations.filter(guardrail__check_name=check)
        else:
            return traces.none()
        recent = violations.order_by("-created_at").values("trace_id")[:200]
        return traces.filter(pk__in=recent).order_by("-received_at", "-id")[:FAILED_FIRST]

    def row(self, trace: RunTrace, failed: bool) -> dict[str, Any]:
        detail = reverse("api-trace", args=[trace.trace_id])
        return {
            "id": trace.trace_id,
            "agent": trace.agent,
            "flow": trace.flow,
            "failed": failed,
            "startedAt": trace.started_at.isoformat() if trace.started_at else None,
            "url": f"{detail}?{urlencode({'tenant': self.tenant.slug})}" if self.tenant else detail,
        }
