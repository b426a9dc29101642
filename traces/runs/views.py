"""Pages of evaluation runs: the list, a new run, a run with its live progress, cancel."""

from __future__ import annotations

from datetime import datetime
from typing import Any, cast

from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.http.response import HttpResponseBase
from django.shortcuts import get_object_or_404
from django.urls import reverse
from django.views.generic import DetailView, FormView, ListView, View
from django.views.generic.detail import SingleObjectMixin

from guardrails.engine.judge import KIND as JUDGE_KIND
from guardrails.engine.types import Mode
from guardrails.models import GuardrailRevision
from guardrails.services import enforced_guardrails
from kindgi_console.paging import keyset_page
from kindgi_console.tenancy.scoping import may_in_current_tenant
from kindgi_console.tenancy.views import TenantScopedMixin
from traces.judge.estimate import estimate_run
from traces.models import Evaluation, RunTrace
from traces.runs import evaluations, run_ends
from traces.runs.forms import EvaluationForm
from traces.store import heartbeat

#: `?select=` of the new-run page that ticks the zero-llm guardrails only.
SELECT_ZERO_LLM = "zero-llm"


class EvaluationListView(TenantScopedMixin, ListView):  # type: ignore[type-arg]
    """The current tenant's runs, newest first, with status and progress."""

    model = Evaluation
    template_name = "traces/evaluation_list.html"

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        page = keyset_page(self.request, cast(QuerySet[Evaluation], self.object_list), "created_at")
        kwargs.update(
            runs=page.rows,
            next_url=page.next_url,
            previous_url=page.previous_url,
            can_evaluate=can_evaluate(self.request),
        )
        return super().get_context_data(**kwargs)


def can_evaluate(request: HttpRequest) -> bool:
    """Whether the person may start runs in the current tenant (a reviewer may)."""
    return may_in_current_tenant(request, "run")


def is_author(request: HttpRequest) -> bool:
    """Whether the person authors the current tenant (no judge limit on their runs)."""
    return may_in_current_tenant(request, "author")


class EvaluationCreateView(TenantScopedMixin, FormView):  # type: ignore[type-arg]
    """Start a run over the current tenant's traces; `?guardrail=ID` ticks one guardrail
    (re-evaluating past traces against its new revision, from the guardrail's page), and
    `?select=zero-llm` (the "Zero-llm guardrails only" button) ticks every enabled zero-llm
    one: a run that calls no judge, under any reviewer's limit. The traces' dates are
    whole days, as on the violations page."""

    form_class = EvaluationForm
    template_name = "traces/evaluation_form.html"

    def dispatch(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
        if request.user.is_authenticated and not can_evaluate(request):
            raise PermissionDenied("starting an evaluation needs a role in this tenant")
        return super().dispatch(request, *args, **kwargs)

    def get_form_kwargs(self) -> dict[str, Any]:
        return {**super().get_form_kwargs(), "tenant": self.tenant}

    def get_initial(self) -> dict[str, Any]:
        initial: dict[str, Any] = {"mode": "ci"}
        for name in ("agent", "flow", "since", "until", "upload", "mode"):
            if self.request.GET.get(name):
                initial[name] = self.request.GET[name]
        chosen = self.chosen_guardrails(self.request.GET)
        if chosen:
            initial["guardrails"] = chosen
        return initial

    def chosen_guardrails(self, query: Any) -> list[str]:
        """The guardrails the query string ticks: zero-llm ones only, or those named."""
        if query.get("select") == SELECT_ZERO_LLM and self.tenant is not None:
            return evaluations.zero_llm_guardrails(self.tenant)
        return list(query.getlist("guardrails") or query.getlist("guardrail"))

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        context = super().get_context_data(**kwargs)
        preview = self.preview_form()
        valid = preview is not None and preview.is_valid()
        filters = preview.filters() if preview is not None and valid else {}
        chosen = list(preview.cleaned_data["guardrails"]) if preview is not None and valid else []
        mode: Mode = preview.cleaned_data["mode"] if preview is not None and valid else "ci"
        traces = evaluations.selected_traces(self.tenant.pk, filters) if self.tenant else RunTrace.objects.none()
        estimate = self.estimate_judge_cost(chosen, traces, mode)
        over = (
            None
            if self.tenant is None or is_author(self.request)
            else (evaluations.reviewer_limit_exceeded(self.tenant, estimate))
        )
        context.update(
            selected_traces=traces.count(),
            filters=filters,
            judge_estimate=estimate,
            limit_reason=over,
            zero_llm=SELECT_ZERO_LLM,
            judge_kind=JUDGE_KIND,
        )
        return context

    def preview_form(self) -> EvaluationForm | None:
        """The form as the query string fills it (`?guardrail=` from a guardrail's page
        ticks that one): what the count and the estimate are for."""
        if self.request.method == "POST":
            return EvaluationForm(self.request.POST, tenant=self.tenant)
        if not self.request.GET:
            return None
        data = self.request.GET.copy()
        data.setlist("guardrails", self.chosen_guardrails(self.request.GET))
        data.setdefault("mode", "ci")
        return EvaluationForm(data, tenant=self.tenant)

    def estimate_judge_cost(self, chosen: list[Any], traces: Any, mode: Mode) -> dict[str, Any] | None:
        """What the run's llm-judge guardrails will cost (None: the run judges nothing).

        The guardrails are the ticked ones, or every enabled one when none is ticked, at
        their current revisions, as the run will pin them.
        """
        wanted = {guardrail.guardrail_id for guardrail in chosen}
        if self.tenant is None:
            return None
        guardrails = [
            item.guardrail for item in enforced_guardrails(self.tenant) if not wanted or item.guardrail.id in wanted
        ]
        if not any(g.kind == JUDGE_KIND for g in guardrails):
            return None
        return estimate_run(guardrails, traces, self.tenant, mode=mode)

    def form_valid(self, form: EvaluationForm) -> HttpResponse:
        tenant = self.tenant
        assert tenant is not None  # can_evaluate needs a role in it
        request = evaluations.RunRequest(
            tenant=tenant,
            guardrails=[g.guardrail_id for g in form.cleaned_data["guardrails"]],
            filters=form.filters(),
            mode=form.cleaned_data["mode"],
            started_by=self.request.user,
            label=self.request.user.get_username(),
            by_author=is_author(self.request),
        )
        try:
            run = evaluations.create_run(request)
        except evaluations.RunRequestError as error:
            form.add_issues(error.issues)
            return self.form_invalid(form)
        return HttpResponseRedirect(reverse("evaluation-detail", args=[run.pk]))


def took(started: datetime | None, finished: datetime | None) -> str:
    """How long a run took, in words a person reads at a glance: "8 seconds", "2 minutes 5 seconds"."""
    if started is None or finished is None:
        return ""
    seconds = max(0, round((finished - started).total_seconds()))
    parts = [(seconds // 3600, "hour"), (seconds % 3600 // 60, "minute"), (seconds % 60, "second")]
    words = [f"{n} {unit}{'' if n == 1 else 's'}" for n, unit in parts if n]
    return " ".join(words[:2]) or "under a second"


class EvaluationDetailView(TenantScopedMixin, DetailView):  # type: ignore[type-arg]
    """One run: live progress bar, the summary per guardrail, cancel."""

    model = Evaluation
    template_name = "traces/evaluation_detail.html"
    context_object_name = "run"

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        run: Evaluation = self.object
        summary = run_ends.live_summary(run)
        revisions = {
            r.guardrail.guardrail_id: r
            for r in GuardrailRevision.objects.filter(pk__in=run.revisions.values("pk")).select_related("guardrail")
        }
        rows = [{"id": name, "revision": revisions.get(name), **counts} for name, counts in summary.items()]
        kwargs.update(
            summary_rows=rows,
            status_url=f"/api/v1/evaluations/{run.pk}",
            can_evaluate=can_evaluate(self.request),
            took=took(run.started_at, run.finished_at),
            worker_missing=None if run.is_final else heartbeat.worker_missing(),
        )
        return super().get_context_data(**kwargs)


class EvaluationCancelView(TenantScopedMixin, SingleObjectMixin, View):  # type: ignore[type-arg]
    """POST: cancel a run of the current tenant (an author's)."""

    model = Evaluation
    scope = "run"

    def post(self, request: HttpRequest, pk: int) -> HttpResponse:
        run = get_object_or_404(self.get_queryset(), pk=pk)
        if run_ends.cancel_run(run):
            messages.success(request, f"Evaluation {run.pk} is cancelled: its remaining traces are not evaluated.")
        else:
            messages.info(request, f"Evaluation {run.pk} had already {run.status}.")
        return HttpResponseRedirect(reverse("evaluation-detail", args=[run.pk]))
