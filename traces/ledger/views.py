"""The judge cost ledger pages: spend per tenant, guardrail, model or day, a chart, and CSV."""

from __future__ import annotations

from datetime import date, timedelta
from decimal import Decimal
from typing import Any, cast

from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse, StreamingHttpResponse
from django.shortcuts import render
from django.utils import timezone
from django.views import View

from kindgi_console.filters import PageFilterForm, day_start
from kindgi_console.paging import PAGE_SIZES, keyset_page
from kindgi_console.tenancy.scoping import tenant_choices
from kindgi_console.tenancy.views import TenantScopedMixin
from traces.judge import ledger
from traces.ledger import budget
from traces.models import JudgeLedgerEntry, LedgerDay
from traces.store import filters

#: How far back charts look when the filter names no start.
from traces.store.pages import chart_data, chart_days, guardrail_choices


class LedgerView(TenantScopedMixin, View):
    """The judge cost ledger: sums by guardrail, model, tenant or day, a chart, the calls."""

    model = JudgeLedgerEntry
    template_name = "traces/ledger.html"

    def filterset(self, data: Any) -> filters.LedgerPageFilter:
        data = data.copy()
        if self.grouping(data) == "tenant" and not data.get("tenant"):
            data["tenant"] = filters.ALL_TENANTS  # "By tenant" compares every tenant one may read
        tenants = [(t.slug, t.name or t.slug) for t in tenant_choices(self.request.user)]
        return filters.LedgerPageFilter(
            data, guardrails=guardrail_choices(self.request), tenants=tenants, current_tenant=self.tenant
        )

    def entries(self, filterset: filters.LedgerPageFilter) -> QuerySet[JudgeLedgerEntry]:
        """The caller's entries (every tenant they may read), narrowed by the filter."""
        return filterset.apply(JudgeLedgerEntry.objects.for_caller(self.caller, self.scope))

    def days(self, filterset: filters.LedgerPageFilter) -> QuerySet[LedgerDay]:
        """The daily roll-up under the same scope and filter (the page's are whole days)."""
        return filterset.days(LedgerDay.objects.for_caller(self.caller, self.scope))

    @staticmethod
    def grouping(data: Any) -> str:
        """What the sums are grouped by (guardrail unless the page asks otherwise)."""
        group = data.get("group")
        return group if group in dict(filters.LEDGER_GROUPS) else "guardrail"

    def get(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        filterset, group = self.filterset(request.GET), self.grouping(request.GET)
        form = cast(PageFilterForm, filterset.form)
        entries, days = self.entries(filterset), self.days(filterset)
        groups = ledger.summarise(entries, [group], days)
        first, last = chart_days(form)
        # The chart's series follow the chosen grouping (by day: one series, the day's total).
        series = group if group != "day" else None
        daily = ledger.summarise(
            entries.filter(created_at__gte=day_start(first), created_at__lt=day_start(last + timedelta(1))),
            ["day", series] if series else ["day"],
            days.filter(day__gte=first, day__lte=last),
        )
        chart = chart_data(
            [(date.fromisoformat(g["day"]), g[series] if series else "total", Decimal(g["costUsd"])) for g in daily],
            first,
            last,
            y_format="usd",
            title=f"Judge cost per day by {group}",
        )
        per_call = budget.max_cost(form.value("guardrail")) if form.value("guardrail") else None
        if per_call is not None:
            chart = budget.with_budget(chart, daily, per_call)
        page = keyset_page(request, ledger.entries_for_listing(entries), "created_at")
        query = request.GET.copy()
        for name in ("after", "before", "size", "group", "rows"):
            query.pop(name, None)
        return render(
            request,
            self.template_name,
            {
                "form": form,
                "group": group,
                "groups": groups,
                "total": ledger.totals(groups),
                "chart": chart,
                "page": page,
                "budget_per_call": per_call,
                "entries": page.rows,
                "page_sizes": PAGE_SIZES,
                "datalists": [("model-options", [g["model"] for g in ledger.summarise(entries, ["model"], days)])],
                "filter_query": query.urlencode(),
                "group_choices": filters.LEDGER_GROUPS,
                "nav_active": "ledger",
            },
        )


class LedgerExportView(LedgerView):
    """CSV of the filtered ledger: its sums by the chosen group, or (`rows=entries`) each call."""

    def get(  # type: ignore[override]  # a CSV download streams
        self, request: HttpRequest, *args: Any, **kwargs: Any
    ) -> StreamingHttpResponse:
        filterset, group = self.filterset(request.GET), self.grouping(request.GET)
        entries = self.entries(filterset)
        stamp = timezone.localdate().isoformat()
        if request.GET.get("rows") == "entries":
            lines, name = ledger.csv_lines(entries), f"kindgi-ledger-calls-{stamp}.csv"
        else:
            groups = ledger.summarise(entries, [group], self.days(filterset))
            lines = ledger.summary_csv_lines(groups, [group])
            name = f"kindgi-ledger-by-{group}-{stamp}.csv"
        response = StreamingHttpResponse(lines, content_type="text/csv; charset=utf-8")
        response["Content-Disposition"] = f'attachment; filename="{name}"'
        return response
