"""The guardrail list and detail pages: each guardrail with what the traces say of it.

The list counts each guardrail's open violations and ranks by precision; the detail page
shows recent violations, the pass rate, the judge spend, review quality, calibration and
shadow figures. Those are the current tenant's only (`current_rows`); the guardrails
themselves are read as every guardrail page reads them (guardrails.views.GuardrailPageMixin).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.db.models import Case, Count, F, FloatField, IntegerField, OuterRef, Q, Subquery, Sum, Value, When
from django.db.models.functions import Cast, Coalesce
from django.http import HttpRequest
from django.urls import reverse
from django.utils import timezone
from django.utils.http import urlencode
from django.views.generic import TemplateView

from guardrails import deployment
from guardrails.engine.schema import GUARDRAIL_SCHEMA
from guardrails.engine.stages import STAGES
from guardrails.pages import pass_rate_chart, pretty_json
from guardrails.services import default_stages, guardrail_stages, revision_authors
from guardrails.views import GuardrailPageMixin
from kindgi_console.tenancy.scoping import current_rows, current_tenant
from traces.judge import ledger
from traces.models import (
    CalibrationItem,
    CalibrationSample,
    EvaluationResult,
    JudgeLedgerEntry,
    LedgerDay,
    Violation,
    ViolationDay,
    escalation_queue,
)
from traces.review import calibration, quality
from traces.review.calibration_views import can_label, latest_calibration
from traces.review.shadow import SHADOW_DAYS, shadow_comparison
from traces.store import labelled_set

PAGE_SIZE = 50
#: The guardrail page shows its judge spend over this many days.
SPEND_DAYS = 30
SEVERITIES = ["info", "warn", "error", "critical"]
BUILTIN_ACTIONS = ["halt", "log-only", "retry", "escalate", "compensate"]
KINDS = GUARDRAIL_SCHEMA["properties"]["kind"].get("examples", ["zero-llm", "llm-judge", "external"])


# ---------------------------------------------------------------------------- list


class CurrentTenantRows:
    """What the traces say of guardrails, in the current tenant only."""

    request: HttpRequest

    def rows(self, model: Any) -> Any:
        return current_rows(self.request, model.objects)


class GuardrailListView(CurrentTenantRows, GuardrailPageMixin, TemplateView):
    """Every live guardrail, filtered and searched, `PAGE_SIZE` at a time by id (keyset)."""

    template_name = "guardrails/guardrail_list.html"
    filters = ("kind", "check", "severity", "action", "enabled", "q")

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        params = {name: self.request.GET.get(name, "").strip() for name in self.filters}
        after = self.request.GET.get("after", "")
        if self.request.GET.get("sort") == "recall":
            return {
                **super().get_context_data(**kwargs),
                **self.page_context(params, self.by_recall(self.filtered(params)), "", ""),
                "sort": "recall",
            }
        if self.request.GET.get("sort") == "precision":
            # A short list (guardrails, not traces): the first page by precision, without keyset.
            ranked = list(self.by_precision(self.filtered(params))[:PAGE_SIZE])
            return {
                **super().get_context_data(**kwargs),
                **self.page_context(params, ranked, "", ""),
                "sort": "precision",
            }
        rows = list(self.filtered(params).filter(guardrail_id__gt=after)[: PAGE_SIZE + 1])
        page = rows[:PAGE_SIZE]
        next_url = self.page_url(params, page[-1].guardrail_id) if len(rows) > PAGE_SIZE else ""
        previous_url = self.page_url(params, "") if after else ""
        return {
            **super().get_context_data(**kwargs),
            **self.page_context(params, page, next_url, previous_url),
            "sort": "id",
        }

    def page_context(self, params: dict[str, str], page: list[Any], next_url: str, previous_url: str) -> dict[str, Any]:
        return {
            "guardrails": page,
            "params": params,
            "filtered": any(params.values()),
            "next_url": next_url,
            "previous_url": previous_url,
            "kinds": sorted(set(KINDS) | {check.kind for check in deployment.check_registry()}),
            "checks": sorted(check.id for check in deployment.check_registry()),
            "severities": SEVERITIES,
            "actions": BUILTIN_ACTIONS,
            "can_author": self.can_author,
            "sandbox_postures": deployment.sandbox_postures(),
        }

    def filtered(self, params: dict[str, str]) -> Any:
        rows = self.visible().defer("document")
        exact = {"kind": "kind", "check": "check_name", "severity": "severity", "action": "on_violation"}
        rows = rows.filter(**{column: params[name] for name, column in exact.items() if params[name]})
        if params["enabled"] in ("yes", "no"):
            rows = rows.filter(enabled=params["enabled"] == "yes")
        if params["q"]:
            q = params["q"]
            rows = rows.filter(Q(guardrail_id__icontains=q) | Q(name__icontains=q) | Q(document__icontains=q))
        return rows.annotate(open_violations=self.open_violations()).order_by("guardrail_id")

    def by_precision(self, rows: Any) -> Any:
        """Worst precision first (guardrails without a review last), from the current
        tenant's violations: the guardrails whose verdicts reviewers overturn the most."""
        scoped = self.rows(ViolationDay).filter(guardrail=OuterRef("pk")).order_by().values("guardrail")
        reviewed = scoped.annotate(n=Sum("reviewed")).values("n")
        wrong = scoped.annotate(n=Sum("false_positives")).values("n")
        reviewed_n = Coalesce(Subquery(reviewed, output_field=IntegerField()), Value(0))
        wrong_n = Coalesce(Subquery(wrong, output_field=IntegerField()), Value(0))
        precision = Case(
            When(reviewed_count=0, then=Value(None)),
            default=Value(1.0) - Cast(F("false_positive_count"), FloatField()) / F("reviewed_count"),
            output_field=FloatField(),
        )
        return (
            rows.annotate(reviewed_count=reviewed_n, false_positive_count=wrong_n)
            .annotate(precision=precision)
            .order_by(F("precision").asc(nulls_last=True), "guardrail_id")
        )

    def by_recall(self, rows: Any) -> list[Any]:
        """Worst calibrated recall first (guardrails never calibrated last), from the newest
        calibration sample of each in the current tenant: the guardrails that miss the most
        of what people fail. The first page, as by precision."""
        figures = calibration.newest_agreements(self.rows(CalibrationSample))
        ranked = []
        for guardrail in rows:
            found = figures.get(guardrail.pk)
            recall, precision = (None, None) if found is None else (found.recall(), found.precision())
            guardrail.recall = None if recall is None else recall[0]
            guardrail.calibrated_precision = None if precision is None else precision[0]
            guardrail.calibrated_labels = 0 if found is None else found.labelled
            ranked.append(guardrail)
        ranked.sort(key=lambda g: (g.recall is None, g.recall or 0.0, g.guardrail_id))
        return ranked[:PAGE_SIZE]

    def open_violations(self) -> Any:
        """The current tenant's open violations of each guardrail, as one subquery."""
        counts = (
            self.rows(Violation)
            .filter(guardrail=OuterRef("pk"), state=Violation.State.OPEN)
            .order_by()
            .values("guardrail")
            .annotate(n=Count("pk"))
            .values("n")
        )
        return Coalesce(Subquery(counts, output_field=IntegerField()), Value(0))

    def page_url(self, params: dict[str, str], after: str) -> str:
        query = {name: value for name, value in params.items() if value}
        if after:
            query["after"] = after
        return f"{reverse('guardrail-list')}?{urlencode(query)}" if query else reverse("guardrail-list")


# ---------------------------------------------------------------------------- detail


class GuardrailDetailView(CurrentTenantRows, GuardrailPageMixin, TemplateView):
    """One guardrail: its document, summary, revisions, recent violations and pass rate."""

    template_name = "guardrails/guardrail_detail.html"
    revisions_shown = 20

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        guardrail = self.live_guardrail(kwargs["guardrail_id"])
        revisions = list(guardrail.revisions.defer("document").order_by("-number")[: self.revisions_shown])
        labels = revision_authors(revisions, self.caller)
        for revision in revisions:
            revision.created_by_label = labels[revision.pk]
        violations = (
            self.rows(Violation)
            .filter(guardrail=guardrail)
            .select_related("trace", "revision")
            .order_by("-created_at", "-pk")[:10]
        )
        chart = pass_rate_chart(self.rows(EvaluationResult).filter(guardrail=guardrail))
        spend_since = timezone.localdate() - timedelta(days=SPEND_DAYS - 1)
        spend = ledger.summarise(
            self.rows(JudgeLedgerEntry).filter(guardrail=guardrail, created_at__date__gte=spend_since),
            [],
            self.rows(LedgerDay).filter(guardrail=guardrail, day__gte=spend_since),
        )[0]
        period = quality_period(self.request)
        # The last `period` days, today included, from their midnight: whole days of the roll-up.
        since = quality.midnight(timezone.localdate() - timedelta(days=period - 1)) if period else None
        overall, per_revision = quality.rolled_up_quality(
            self.rows(ViolationDay).filter(guardrail=guardrail), self.rows(Violation).filter(guardrail=guardrail), since
        )
        shadow_stats = shadow_comparison(self.rows(EvaluationResult), guardrail)
        tenant = current_tenant(self.request)
        return {
            **super().get_context_data(**kwargs),
            "calibration": latest_calibration(self.request, guardrail),
            "can_label": can_label(self.request),
            "shadow_stats": shadow_stats,
            "shadow_days": SHADOW_DAYS,
            "stage_choices": [(stage, stage in guardrail_stages(guardrail)) for stage in STAGES],
            "default_stages": default_stages(guardrail.check_name),
            "quality": overall,
            "quality_revisions": per_revision,
            "quality_period": period,
            "quality_periods": QUALITY_PERIODS,
            "guardrail": guardrail,
            "doc": guardrail.document,
            "queue": escalation_queue(guardrail.document),
            "document_json": pretty_json(guardrail.document),
            "revisions": revisions,
            "revision_numbers": list(range(guardrail.revision, 0, -1)),
            "violations": list(violations),
            "chart": chart,
            "can_author": self.can_author and self.may_write(guardrail),
            "saved": self.request.GET.get("saved") == "1",
            "spend": spend,
            "spend_days": SPEND_DAYS,
            "spend_url": f"{reverse('ledger')}?{urlencode({'guardrail': guardrail.guardrail_id})}",
            "tenant": tenant,
            "labelled_count": labelled_set.count(self.rows(CalibrationItem), self.rows(Violation), guardrail),
            "labelled_set_url": labelled_set_url(guardrail.guardrail_id, tenant.slug if tenant else ""),
        }


def labelled_set_url(guardrail_id: str, tenant: str) -> str:
    """The export of the guardrail's labelled set, of the page's tenant."""
    url = reverse("api-guardrail-labelled-set", args=[guardrail_id])
    return f"{url}?{urlencode({'tenant': tenant})}" if tenant else url


#: The periods the quality section offers, in days (0: every violation).
QUALITY_PERIODS = (7, 30, 90, 0)


def quality_period(request: HttpRequest) -> int:
    raw = request.GET.get("period", "")
    return int(raw) if raw.isdigit() and int(raw) in QUALITY_PERIODS else 30
