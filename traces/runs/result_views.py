"""Pages of a run's results and of two runs compared: what a run page's counts link to."""

from __future__ import annotations

from typing import Any

from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.generic import View

from kindgi_console import paging
from kindgi_console.tenancy.scoping import current_rows
from kindgi_console.tenancy.views import TenantScopedMixin
from traces.models import Evaluation, RunComparison
from traces.runs import comparisons, run_ends, run_results


class RunResultsView(TenantScopedMixin, View):
    """A run's results: trace, guardrail, revision, status, reason, action, severity.

    Filtered by guardrail and status; with no status asked, failures only when the run has
    any (`?status=all` shows every status). Cursor-paged forward, first page one click away.
    """

    model = Evaluation

    def get(self, request: HttpRequest, pk: int) -> HttpResponse:
        run = get_object_or_404(scoped_runs(self), pk=pk)
        summary = run_ends.live_summary(run)
        guardrail = request.GET.get("guardrail", "")
        status = chosen_status(request.GET.get("status"), summary, guardrail)
        results = run_results.run_results(run, guardrail=guardrail, status=status)
        try:
            page = run_results.results_page(results, after=request.GET.get("after"))
        except paging.BadCursor:
            page = run_results.results_page(results, after=None)
        query = request.GET.copy()
        query.pop("after", None)
        query["status"] = status or "all"
        first_url = f"{request.path}?{query.urlencode()}"
        query["after"] = page.next_cursor or ""
        return render(
            request,
            "traces/evaluation_results.html",
            {
                "run": run,
                "rows": [run_results.result_as_dict(r) for r in page.rows],
                "guardrails": sorted(summary),
                "guardrail": guardrail,
                "status": status or "all",
                "statuses": run_results.STATUSES,
                "first_url": first_url if request.GET.get("after") else None,
                "next_url": f"{request.path}?{query.urlencode()}" if page.next_cursor else None,
                "nav_active": "evaluations",
            },
        )


def scoped_runs(view: TenantScopedMixin) -> Any:
    """The current tenant's runs, as every run page sees them (another tenant's: 404)."""
    return current_rows(view.request, Evaluation.objects, view.scope)  # type: ignore[attr-defined]


def chosen_status(asked: str | None, summary: dict[str, dict[str, int]], guardrail: str) -> str:
    """The status filter: the one asked for, `all` for none, else failures when there are."""
    if asked == "all":
        return ""
    if asked in run_results.STATUSES:
        return asked
    rows = [counts for name, counts in summary.items() if not guardrail or name == guardrail]
    return "fail" if any(counts.get("fail", 0) for counts in rows) else ""


class RunCompareView(TenantScopedMixin, View):
    """Two runs of the tenant compared per shared guardrail (default: the previous run).

    Computed once in the background (`traces.runs.comparisons`): while it is, the page shows its
    progress and reloads when it is done; then the figures and the first traces of each list.
    """

    model = Evaluation

    def get(self, request: HttpRequest, pk: int) -> HttpResponse:
        runs = scoped_runs(self)
        run = get_object_or_404(runs, pk=pk)
        other = chosen_other(runs, run, request.GET.get("with", ""))
        comparison = comparisons.comparison_for(run, other) if other is not None else None
        done = comparison is not None and comparison.status == RunComparison.Status.SUCCEEDED
        choices = runs.exclude(pk=run.pk).order_by("-pk").values_list("pk", "created_at")[:50]
        return render(
            request,
            "traces/evaluation_compare.html",
            {
                "run": run,
                "other": other,
                "comparison": comparison,
                "rows": comparisons.figures_with_traces(comparison) if comparison is not None and done else [],
                "done": done,
                "status_url": f"/api/v1/evaluations/{run.pk}/compare?with={other.pk}" if other is not None else "",
                "choices": choices,
                "nav_active": "evaluations",
            },
        )


def chosen_other(runs: Any, run: Evaluation, raw: str) -> Evaluation | None:
    """The run to compare with: the one asked for (another tenant's: 404), else the previous one."""
    if not raw:
        return run_results.previous_run(run)
    if not raw.isdigit():
        raise Http404("there is no such run")
    other: Evaluation = get_object_or_404(runs, pk=int(raw))
    return other


class RunCompareTracesView(TenantScopedMixin, View):
    """One list of a comparison (a guardrail's newly or no longer failing traces), keyset paged."""

    model = Evaluation

    def get(self, request: HttpRequest, pk: int) -> HttpResponse:
        runs = scoped_runs(self)
        run = get_object_or_404(runs, pk=pk)
        other = chosen_other(runs, run, request.GET.get("with", ""))
        guardrail, kind = request.GET.get("guardrail", ""), request.GET.get("change", "")
        if other is None or kind not in comparisons.Kind.values:
            raise Http404("there is no such list")
        comparison = comparisons.comparison_for(run, other)
        if comparison is None or comparison.status != RunComparison.Status.SUCCEEDED:
            return redirect(f"{reverse('evaluation-compare', args=[run.pk])}?with={other.pk}")
        try:
            page = comparisons.changes_page(comparison, guardrail, kind, after=request.GET.get("after"))
        except paging.BadCursor:
            page = comparisons.changes_page(comparison, guardrail, kind)
        query = request.GET.copy()
        query["after"] = page.next_cursor or ""
        figures = next((row for row in comparison.guardrails if row["guardrail"] == guardrail), None)
        return render(
            request,
            "traces/evaluation_compare_traces.html",
            {
                "run": run,
                "other": other,
                "guardrail": guardrail,
                "kind": kind,
                "figures": figures,
                "rows": page.rows,
                "next_url": f"{request.path}?{query.urlencode()}" if page.next_cursor else None,
                "nav_active": "evaluations",
            },
        )
