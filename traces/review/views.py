"""The pages of traces, violations (with their review) and the judge cost ledger.

Every list answers from indexed queries with a fixed number of queries whatever the page
size (keyset pagination, names joined or annotated, never fetched row by row), and every
page sees only the current tenant's rows through `TenantScopedMixin`. Trace content is
passed to the templates as plain strings, which they escape.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from datetime import timedelta
from typing import Any, cast

from django.contrib import messages
from django.db.models import Count, IntegerField, OuterRef, Prefetch, QuerySet, Subquery
from django.db.models.fields.json import KT
from django.db.models.functions import Coalesce
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect, JsonResponse
from django.shortcuts import render
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.views import View
from django.views.generic import DetailView

from kindgi_console.filters import PageFilterForm, day_start
from kindgi_console.paging import PAGE_SIZES, keyset_page
from kindgi_console.tenancy.scoping import current_rows
from kindgi_console.tenancy.views import TenantScopedMixin
from traces.models import EvaluationResult, RunTrace, Violation, ViolationDay, ViolationReview
from traces.review import claims, forms, workflow
from traces.store import filters, timeline, violation_days
from traces.store.pages import chart_data, chart_days, violation_filter


def violation_count() -> Subquery:
    return Subquery(
        Violation.objects.filter(trace=OuterRef("pk")).order_by().values("trace").annotate(n=Count("pk")).values("n"),
        output_field=IntegerField(),
    )


# ------------------------------------------------------------------------------ traces


class TraceListView(TenantScopedMixin, View):
    """The current tenant's traces, newest first, with filters."""

    model = RunTrace
    template_name = "traces/trace_list.html"

    def get(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        filterset = filters.TracePageFilter(request.GET)
        traces = (
            filterset.apply(self.get_queryset())
            .only("pk", "tenant_id", "trace_id", "agent", "flow", "started_at", "ended_at", "received_at", "withheld")
            .annotate(input_text=KT("document__input"), violation_count=Coalesce(violation_count(), 0))
        )
        page = keyset_page(request, traces, "received_at")
        suggestions = self._recent_values()
        return render(
            request,
            self.template_name,
            {
                "form": filterset.form,
                "page": page,
                "traces": page.rows,
                "page_sizes": PAGE_SIZES,
                "datalists": [("agent-options", suggestions["agents"]), ("flow-options", suggestions["flows"])],
                "nav_active": "traces",
            },
        )

    def _recent_values(self) -> dict[str, list[str]]:
        """Agents and flows of the latest traces, as suggestions for the filters (bounded)."""
        recent = self.get_queryset().order_by("-received_at").values_list("agent", "flow")[:500]
        agents, flows = set(), set()
        for agent, flow in recent:
            agents.add(agent)
            flows.add(flow)
        return {"agents": sorted(a for a in agents if a), "flows": sorted(f for f in flows if f)}


class TraceDetailView(TenantScopedMixin, DetailView):  # type: ignore[type-arg]
    """One trace as a timeline, with its results per guardrail and its violations."""

    model = RunTrace
    template_name = "traces/trace_detail.html"
    context_object_name = "trace"

    def get_queryset(self) -> QuerySet[RunTrace]:
        return cast(
            QuerySet[RunTrace],
            super()
            .get_queryset()
            .select_related("tenant")
            .prefetch_related(
                Prefetch(
                    "results",
                    queryset=EvaluationResult.objects.select_related("guardrail", "revision").order_by(
                        "guardrail__guardrail_id", "-created_at"
                    ),
                ),
                Prefetch("violations", queryset=Violation.objects.select_related("guardrail").order_by("-created_at")),
            ),
        )

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        context = super().get_context_data(**kwargs)
        trace: RunTrace = self.object
        document = trace.document if isinstance(trace.document, dict) else {}
        results = list(trace.results.all())
        context.update(
            steps=timeline.steps(document, withheld=trace.withheld),
            citations=timeline.citations(document),
            usage=document.get("usage") if isinstance(document.get("usage"), dict) else None,
            metadata=timeline.pretty(document["metadata"]) if document.get("metadata") else "",
            otlp=_otlp_of(document),
            raw=timeline.pretty(document),
            input_text=timeline.text(document.get("input")),
            results=results,
            counts=_status_counts(results),
            violations=list(trace.violations.all()),
            tool_count=len(document.get("toolCalls") or []),
            message_count=len(document.get("messages") or []),
            nav_active="traces",
        )
        return context


def _otlp_of(document: dict[str, Any]) -> dict[str, Any] | None:
    """Where a trace received over OTLP came from (metadata.otlp, docs/otlp.md), else None."""
    metadata = document.get("metadata")
    otlp = metadata.get("otlp") if isinstance(metadata, dict) else None
    return otlp if isinstance(otlp, dict) else None


def _status_counts(results: Iterable[EvaluationResult]) -> dict[str, int]:
    counts: dict[str, int] = defaultdict(int)
    for result in results:
        counts[result.status] += 1
    return dict(counts)


# ------------------------------------------------------------------------------ violations


def violation_rows(violations: QuerySet[Violation]) -> QuerySet[Violation]:
    """The columns the violation list shows, names joined in the same query."""
    return violations.select_related("guardrail", "trace").only(
        "pk",
        "tenant_id",
        "created_at",
        "action",
        "severity",
        "mode",
        "reason",
        "agent",
        "flow",
        "state",
        "reviewed_at",
        "reviewed_by_label",
        "queue",
        "assignee",
        "assigned_at",
        "guardrail__guardrail_id",
        "guardrail__name",
        "trace__trace_id",
        "trace__withheld",
    )


class ViolationListView(TenantScopedMixin, View):
    """The current tenant's violation history with every filter of the API and review."""

    model = Violation
    template_name = "traces/violation_list.html"

    def get(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        filterset = violation_filter(request, request.GET)
        form = filterset.form
        page = keyset_page(request, violation_rows(filterset.apply(self.get_queryset())), "created_at")
        query = request.GET.copy()
        for name in ("after", "before", "size"):
            query.pop(name, None)
        chart_query = query.urlencode()
        return render(
            request,
            self.template_name,
            {
                "form": form,
                "page": page,
                "violations": page.rows,
                "page_sizes": PAGE_SIZES,
                "states": workflow.STATES,
                "filter_query": chart_query,
                "filter_items": [(name, value) for name, value in query.items() if value],
                "chart_link": f"{reverse('violation-list')}?{chart_query}",
                "chart_guardrail_url": f"{reverse('violation-chart')}?by=guardrail&{chart_query}",
                "chart_severity_url": f"{reverse('violation-chart')}?by=severity&{chart_query}",
                "actions": [(state, workflow.ACTION_LABELS[state]) for state in workflow.STATES],
                "nav_active": "violations",
            },
        )


class ViolationChartView(TenantScopedMixin, View):
    """Violations per day, per guardrail or per severity, as charts.js reads them.

    One aggregate query grouped by day over the (tenant, created_at) index range: the
    filter's dates, else the last CHART_DAYS days.
    """

    model = Violation

    def get(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        by = "severity" if request.GET.get("by") == "severity" else "guardrail"
        filterset = violation_filter(request, request.GET)
        form = cast(PageFilterForm, filterset.form)
        first, last = chart_days(form)
        violations = filterset.apply(self.get_queryset()).filter(
            created_at__gte=day_start(first), created_at__lt=day_start(last + timedelta(1))
        )
        rows = violation_days.chart_rows(violations, self.days(form), by, first, last)
        order = ["critical", "error", "warn", "info", ""] if by == "severity" else None
        return JsonResponse(
            chart_data(rows, first, last, order=order, y_format="count", title=f"Violations per day by {by}")
        )

    def days(self, form: PageFilterForm) -> QuerySet[ViolationDay] | None:
        """The roll-up under the page's scope and filter, when it names nothing the roll-up
        does not count (review state, action, mode, agent, flow); else None."""
        named = {name for name in form.fields if form.value(name) not in (None, "")}
        if not named <= violation_days.ROLLED_UP_FILTERS:
            return None
        days: QuerySet[ViolationDay] = current_rows(self.request, ViolationDay.objects, self.scope)
        for name in ("guardrail", "severity"):
            if form.value(name):
                field = "guardrail__guardrail_id" if name == "guardrail" else name
                days = days.filter(**{field: form.value(name)})
        return days


class ViolationDetailView(TenantScopedMixin, DetailView):  # type: ignore[type-arg]
    """One violation: what failed, on which trace, its review state and history."""

    model = Violation
    template_name = "traces/violation_detail.html"
    context_object_name = "violation"

    def get_queryset(self) -> QuerySet[Violation]:
        violations: QuerySet[Violation] = super().get_queryset()
        return (
            violations.select_related("guardrail", "revision", "trace", "result", "evaluation", "reviewed_by")
            .defer("trace__document")
            .prefetch_related(Prefetch("reviews", queryset=ViolationReview.objects.order_by("-created_at", "-pk")))
        )

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        context = super().get_context_data(**kwargs)
        violation: Violation = self.object
        context.update(
            next_states=workflow.next_states(violation.state),
            claim=claim_context(violation, self.caller),
            history=list(violation.reviews.all()),
            details=timeline.pretty(violation.result.details) if violation.result.details else "",
            form=forms.ReviewForm(),
            nav_active="violations",
        )
        return context


def claim_context(violation: Violation, caller: Any) -> dict[str, Any]:
    """What the claim card of a violation shows the person: whether they hold it, may claim
    it (nobody does and it is not closed) or may release it (theirs, or they are an admin)."""
    mine = violation.assignee is not None and violation.assignee == caller.label
    others = violation.assignee is not None and not mine
    return {
        "mine": mine,
        "may_claim": violation.assignee is None and violation.state not in claims.CLOSED,
        "may_release": mine or (others and claims.may_release_others(caller, violation.tenant_id)),
    }


def _back(request: HttpRequest, fallback: str) -> str:
    target = request.POST.get("next") or fallback
    if not url_has_allowed_host_and_scheme(target, allowed_hosts={request.get_host()}):
        return fallback
    return target


class ViolationReviewView(TenantScopedMixin, View):
    """POST: move one violation to another review state (from its page or the list)."""

    model = Violation
    http_method_names = ["post"]
    scope = "review"

    def post(self, request: HttpRequest, pk: int) -> HttpResponse:
        violation = self.get_queryset().filter(pk=pk).first()
        if violation is None:
            raise Http404
        target = _back(request, reverse("violation-detail", args=[pk]))
        form = forms.ReviewForm(request.POST)
        if not form.is_valid():
            field, errors = next(iter(form.errors.items()))
            messages.error(request, f"{field}: {errors[0]}")
            return HttpResponseRedirect(target)
        outcome = workflow.review(
            self.get_queryset().filter(pk=pk),
            form.cleaned_data["state"],
            form.cleaned_data["note"].strip(),
            self.caller,
        )
        if outcome.refused:
            messages.error(request, f"Not changed: {outcome.refused[0][1]}.")
        else:
            messages.success(request, f"Violation {pk} is now {outcome.state}.")
        return HttpResponseRedirect(target)


class ViolationClaimView(TenantScopedMixin, View):
    """POST `action=claim` or `unclaim`: take or release one violation (from its page or the
    review queue), then back to where it was asked, saying what happened."""

    model = Violation
    http_method_names = ["post"]
    scope = "review"

    def post(self, request: HttpRequest, pk: int) -> HttpResponse:
        if not self.get_queryset().filter(pk=pk).exists():
            raise Http404
        target = _back(request, reverse("violation-detail", args=[pk]))
        release = request.POST.get("action") == "unclaim"
        try:
            done = claims.unclaim(pk, self.caller) if release else claims.claim(pk, self.caller)
        except claims.ClaimError as error:
            messages.error(request, f"Not changed: {error.issues[0].message}.")
            return HttpResponseRedirect(target)
        if release:
            messages.success(request, f"Violation {pk} is released: anyone may claim it.")
        else:
            messages.success(request, f"Violation {pk} is yours since {done.assigned_at:%H:%M}: others see it claimed.")
        return HttpResponseRedirect(target)


class ViolationBulkReviewView(TenantScopedMixin, View):
    """POST: review the ticked violations, or every one the list's filter selects."""

    model = Violation
    http_method_names = ["post"]
    scope = "review"

    def post(self, request: HttpRequest) -> HttpResponse:
        target = _back(request, reverse("violation-list"))
        form = forms.ReviewForm(request.POST)
        if not form.is_valid():
            field, errors = next(iter(form.errors.items()))
            messages.error(request, f"{field}: {errors[0]}")
            return HttpResponseRedirect(target)
        selection = self._selection(request)
        if selection is None:
            messages.error(request, "Tick at least one violation, or choose every violation that matches the filter.")
            return HttpResponseRedirect(target)
        try:
            outcome = workflow.review(
                selection, form.cleaned_data["state"], form.cleaned_data["note"].strip(), self.caller
            )
        except workflow.ReviewError as error:
            messages.error(request, error.issues[0].message)
            return HttpResponseRedirect(target)
        self._report(request, outcome)
        return HttpResponseRedirect(target)

    def _selection(self, request: HttpRequest) -> QuerySet[Violation] | None:
        if request.POST.get("scope") == "filter":
            # The list's filter comes as hidden f-<name> fields, apart from the new `state`.
            filterset = violation_filter(request, request.POST, prefix="f")
            return filterset.apply(self.get_queryset())
        ids = [int(raw) for raw in request.POST.getlist("ids") if raw.isdigit()]
        return self.get_queryset().filter(pk__in=ids) if ids else None

    @staticmethod
    def _report(request: HttpRequest, outcome: workflow.Outcome) -> None:
        moved = len(outcome.reviewed)
        if moved:
            messages.success(request, f"{moved} violation{'s' if moved != 1 else ''} marked {outcome.state}.")
        if outcome.refused:
            count = len(outcome.refused)
            messages.warning(
                request,
                f"{count} left as they were: {outcome.refused[0][1]}" + (" (and others)" if count > 1 else "") + ".",
            )
        if not moved and not outcome.refused:
            messages.info(request, "No violation matched.")
