"""Pages of a run's results and of a run compared with earlier results: what a run page's counts link to."""

from __future__ import annotations

from typing import Any

from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils.http import urlencode
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
    """A run compared, per guardrail revision, with each guardrail's latest earlier results (or
    with one run, `?with=`): newly, no longer and still failing, each count a link to its
    traces, and what was not compared and why.

    Computed once in the background (`traces.runs.comparisons`): while it is (or while a run
    compared has not finished), the page shows the progress and reloads itself when it is done.
    """

    model = Evaluation

    def get(self, request: HttpRequest, pk: int) -> HttpResponse:
        runs = scoped_runs(self)
        run = get_object_or_404(runs, pk=pk)
        other = chosen_other(runs, run, request.GET.get("with", ""))
        comparison = comparisons.comparison_for(run, other)
        done = comparison is not None and comparison.status == RunComparison.Status.SUCCEEDED
        rows = [with_links(run, other, row) for row in comparison.guardrails] if comparison and done else []
        choices = runs.exclude(pk=run.pk).order_by("-pk").values_list("pk", "created_at")[:50]
        waiting = waiting_for(run, other)
        return render(
            request,
            "traces/evaluation_compare.html",
            {
                "run": run,
                "other": other,
                "comparison": comparison,
                "compared": [row for row in rows if row["compared"]],
                "not_compared": [row for row in rows if not row["compared"]],
                "revisions": len(rows),
                "done": done,
                "status_url": compare_api_url(run, other),
                "waiting_for": waiting,
                "waiting_url": f"/api/v1/evaluations/{waiting.pk}" if waiting is not None else "",
                "choices": choices,
                "nav_active": "evaluations",
            },
        )


def compare_api_url(run: Evaluation, other: Evaluation | None) -> str:
    return f"/api/v1/evaluations/{run.pk}/compare" + (f"?with={other.pk}" if other is not None else "")


def waiting_for(run: Evaluation, other: Evaluation | None) -> Evaluation | None:
    """The run compared that has not finished yet (its progress is what the page follows)."""
    return next((one for one in (run, other) if one is not None and not one.is_final), None)


def traces_url(run: Evaluation, other: Evaluation | None, row: dict[str, Any], kind: str) -> str:
    """The page of one list of a comparison: a revision's newly, no longer or still failing traces."""
    query = {"guardrail": row["guardrail"], "revision": row["revision"], "change": kind}
    if other is not None:
        query["with"] = other.pk
    return f"{reverse('evaluation-compare-traces', args=[run.pk])}?{urlencode(query)}"


def with_links(run: Evaluation, other: Evaluation | None, row: dict[str, Any]) -> dict[str, Any]:
    """A revision's figures with the address of each of its lists (zero ones too)."""
    links = {key: traces_url(run, other, row, kind) for kind, key in comparisons.LISTS} if row["compared"] else {}
    results = reverse("evaluation-results", args=[run.pk])
    by_status = {
        status: f"{results}?{urlencode({'guardrail': row['guardrail'], 'status': status})}"
        for status in ("skipped", "error")
    }
    return {**row, "links": links, "results": by_status}


def chosen_other(runs: Any, run: Evaluation, raw: str) -> Evaluation | None:
    """The run to compare with: the one asked for (another tenant's: 404), else None: each
    guardrail's latest earlier results."""
    if not raw:
        return None
    if not raw.isdigit():
        raise Http404("there is no such run")
    other: Evaluation = get_object_or_404(runs.exclude(pk=run.pk), pk=int(raw))
    return other


class RunCompareTracesView(TenantScopedMixin, View):
    """One list of a comparison (a revision's newly, no longer or still failing traces), keyset paged."""

    model = Evaluation

    def get(self, request: HttpRequest, pk: int) -> HttpResponse:
        runs = scoped_runs(self)
        run = get_object_or_404(runs, pk=pk)
        other = chosen_other(runs, run, request.GET.get("with", ""))
        guardrail, kind, raw = (
            request.GET.get("guardrail", ""),
            request.GET.get("change", ""),
            request.GET.get("revision", ""),
        )
        if kind not in comparisons.Kind.values or (raw and not (raw.isdigit() and len(raw) < 10)):
            raise Http404("there is no such list")
        revision = int(raw) if raw else None
        comparison = comparisons.comparison_for(run, other)
        if comparison is None or comparison.status != RunComparison.Status.SUCCEEDED:
            return redirect(f"{reverse('evaluation-compare', args=[run.pk])}" + (f"?with={other.pk}" if other else ""))
        try:
            page = comparisons.changes_page(
                comparison, guardrail, kind, revision=revision, after=request.GET.get("after")
            )
        except paging.BadCursor:
            page = comparisons.changes_page(comparison, guardrail, kind, revision=revision)
        query = request.GET.copy()
        query["after"] = page.next_cursor or ""
        figures = comparisons.figures_of(comparison, guardrail, revision)
        return render(
            request,
            "traces/evaluation_compare_traces.html",
            {
                "run": run,
                "other": other,
                "guardrail": guardrail,
                "kind": kind,
                "figures": figures,
                "count": figures.get(dict(comparisons.LISTS)[comparisons.Kind(kind)], 0) if figures else 0,
                "rows": page.rows,
                "compare_url": reverse("evaluation-compare", args=[run.pk]) + (f"?with={other.pk}" if other else ""),
                "next_url": f"{request.path}?{query.urlencode()}" if page.next_cursor else None,
                "nav_active": "evaluations",
            },
        )
