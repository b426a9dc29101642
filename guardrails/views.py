"""The guardrail pages: list, detail, revision diff, authoring, import and export.

A guardrail belongs to one tenant or to the whole console, as in the REST API: a person
sees the console-wide guardrails and those of the tenants they read (another tenant's is a
404), changes those of the tenants they author for, and only a superuser changes the
console-wide ones. What a page shows of evaluation results and violations is the current
tenant's only, through `TenantScopedMixin`'s scoping.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.contrib import messages
from django.contrib.auth.mixins import LoginRequiredMixin
from django.core.exceptions import PermissionDenied
from django.db.models import Case, Count, F, FloatField, IntegerField, OuterRef, Q, Subquery, Sum, Value, When
from django.db.models.functions import Cast, Coalesce
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import get_object_or_404, render
from django.urls import reverse
from django.utils import timezone
from django.utils.http import urlencode
from django.views import View
from django.views.generic import TemplateView

from guardrails import deployment, quality
from guardrails.engine.schema import GUARDRAIL_SCHEMA
from guardrails.models import Guardrail
from guardrails.pages import document_diff, import_files, pass_rate_chart, pretty_json
from guardrails.services import (
    Author,
    OwnershipError,
    delete_guardrail,
    enforced_document,
    owner_slug,
    register_document,
    revision_authors,
    save_guardrail,
    set_enabled,
    set_shadow,
)
from kindgi_console.tenancy.scoping import Caller, TenantDenied
from kindgi_console.tenancy.views import current_tenant
from traces import ledger
from traces.models import EvaluationResult, JudgeLedgerEntry, LedgerDay, Violation, ViolationDay

PAGE_SIZE = 50
#: The guardrail page shows its judge spend over this many days.
SPEND_DAYS = 30
SEVERITIES = ["info", "warn", "error", "critical"]
BUILTIN_ACTIONS = ["halt", "log-only", "retry", "escalate", "compensate"]
KINDS = GUARDRAIL_SCHEMA["properties"]["kind"].get("examples", ["zero-llm", "llm-judge", "external"])


class GuardrailPageMixin(LoginRequiredMixin):
    """Signed-in people who may read guardrails; `needs_author` for pages that change them."""

    needs_author = False
    request: HttpRequest

    def dispatch(self, request: HttpRequest, *args: Any, **kwargs: Any) -> Any:
        if request.user.is_authenticated:
            caller = Caller(user=request.user)
            if not caller.can("author" if self.needs_author else "read"):
                raise PermissionDenied("this page needs the author role")
            self.can_author = caller.can("author")
        return super().dispatch(request, *args, **kwargs)

    def author(self) -> Author:
        return Author(user=self.request.user, label=self.request.user.get_username())

    @property
    def caller(self) -> Caller:
        return Caller(user=self.request.user)

    def visible(self) -> Any:
        """The live guardrails this person may read: console-wide and their tenants' own."""
        return Guardrail.objects.live().for_caller(self.caller).select_related("tenant")

    def live_guardrail(self, guardrail_id: str) -> Guardrail:
        """A guardrail this person may read; 404 for another tenant's, as for none."""
        guardrail: Guardrail = get_object_or_404(self.visible(), guardrail_id=guardrail_id)
        return guardrail

    def writable_guardrail(self, guardrail_id: str) -> Guardrail:
        """A guardrail this person may change; 403 for a console-wide one of a non-admin."""
        guardrail = self.live_guardrail(guardrail_id)
        if not self.may_write(guardrail):
            raise PermissionDenied("only console admins change a console-wide guardrail")
        return guardrail

    def may_write(self, guardrail: Guardrail) -> bool:
        return Guardrail.objects.for_caller(self.caller, "author").filter(pk=guardrail.pk).exists()


def tenant_rows(request: HttpRequest, model: Any) -> Any:
    """A tenant-owned model's rows of the current tenant, scoped as every page scopes them."""
    tenant = current_tenant(request)
    rows = model.objects.for_caller(Caller(user=request.user))
    return rows.filter(tenant=tenant) if tenant is not None else rows.none()


# ---------------------------------------------------------------------------- list


class GuardrailListView(GuardrailPageMixin, TemplateView):
    """Every live guardrail, filtered and searched, `PAGE_SIZE` at a time by id (keyset)."""

    template_name = "guardrails/guardrail_list.html"
    filters = ("kind", "check", "severity", "action", "enabled", "q")

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        params = {name: self.request.GET.get(name, "").strip() for name in self.filters}
        after = self.request.GET.get("after", "")
        if self.request.GET.get("sort") == "precision":
            # A short list (guardrails, not traces): the first page by precision, without keyset.
            ranked = list(self.by_precision(self.filtered(params))[:PAGE_SIZE])
            return {**super().get_context_data(**kwargs), **self.page_context(params, ranked, "", ""),
                    "sort": "precision"}
        rows = list(self.filtered(params).filter(guardrail_id__gt=after)[: PAGE_SIZE + 1])
        page = rows[:PAGE_SIZE]
        next_url = self.page_url(params, page[-1].guardrail_id) if len(rows) > PAGE_SIZE else ""
        previous_url = self.page_url(params, "") if after else ""
        return {**super().get_context_data(**kwargs), **self.page_context(params, page, next_url, previous_url),
                "sort": "id"}

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
            rows = rows.filter(Q(guardrail_id__icontains=q) | Q(name__icontains=q)
                               | Q(document__icontains=q))
        return rows.annotate(open_violations=self.open_violations()).order_by("guardrail_id")

    def by_precision(self, rows: Any) -> Any:
        """Worst precision first (guardrails without a review last), from the current
        tenant's violations: the guardrails whose verdicts reviewers overturn the most."""
        scoped = tenant_rows(self.request, ViolationDay).filter(guardrail=OuterRef("pk")).order_by().values("guardrail")
        reviewed = scoped.annotate(n=Sum("reviewed")).values("n")
        wrong = scoped.annotate(n=Sum("false_positives")).values("n")
        reviewed_n = Coalesce(Subquery(reviewed, output_field=IntegerField()), Value(0))
        wrong_n = Coalesce(Subquery(wrong, output_field=IntegerField()), Value(0))
        precision = Case(When(reviewed_count=0, then=Value(None)),
                         default=Value(1.0) - Cast(F("false_positive_count"), FloatField()) / F("reviewed_count"),
                         output_field=FloatField())
        return (rows.annotate(reviewed_count=reviewed_n, false_positive_count=wrong_n)
                .annotate(precision=precision)
                .order_by(F("precision").asc(nulls_last=True), "guardrail_id"))

    def open_violations(self) -> Any:
        """The current tenant's open violations of each guardrail, as one subquery."""
        counts = (
            tenant_rows(self.request, Violation)
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


class GuardrailDetailView(GuardrailPageMixin, TemplateView):
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
            tenant_rows(self.request, Violation)
            .filter(guardrail=guardrail)
            .select_related("trace", "revision")
            .order_by("-created_at", "-pk")[:10]
        )
        chart = pass_rate_chart(tenant_rows(self.request, EvaluationResult).filter(guardrail=guardrail))
        spend_since = timezone.localdate() - timedelta(days=SPEND_DAYS - 1)
        spend = ledger.summarise(
            tenant_rows(self.request, JudgeLedgerEntry).filter(guardrail=guardrail, created_at__date__gte=spend_since),
            [], tenant_rows(self.request, LedgerDay).filter(guardrail=guardrail, day__gte=spend_since))[0]
        period = quality_period(self.request)
        # The last `period` days, today included, from their midnight: whole days of the roll-up.
        since = quality.midnight(timezone.localdate() - timedelta(days=period - 1)) if period else None
        overall, per_revision = quality.rolled_up_quality(
            tenant_rows(self.request, ViolationDay).filter(guardrail=guardrail),
            tenant_rows(self.request, Violation).filter(guardrail=guardrail), since)
        shadow_stats = tenant_rows(self.request, EvaluationResult).filter(
            guardrail=guardrail, shadow=True, created_at__gte=timezone.now() - timedelta(days=30),
        ).aggregate(judged=Count("pk"), failing=Count("pk", filter=Q(status="fail")))
        from traces.calibration_views import can_label, latest_calibration

        return {
            **super().get_context_data(**kwargs),
            "calibration": latest_calibration(self.request, guardrail) if guardrail.kind == "llm-judge" else None,
            "can_label": can_label(self.request),
            "shadow_stats": shadow_stats,
            "quality": overall, "quality_revisions": per_revision, "quality_period": period,
            "quality_periods": QUALITY_PERIODS,
            "guardrail": guardrail,
            "doc": guardrail.document,
            "document_json": pretty_json(guardrail.document),
            "revisions": revisions,
            "revision_numbers": list(range(guardrail.revision, 0, -1)),
            "violations": list(violations),
            "chart": chart,
            "can_author": self.can_author and self.may_write(guardrail),
            "saved": self.request.GET.get("saved") == "1",
            "spend": spend, "spend_days": SPEND_DAYS,
            "spend_url": f"{reverse('ledger')}?{urlencode({'guardrail': guardrail.guardrail_id})}",
            "tenant": current_tenant(self.request),
        }


#: The periods the quality section offers, in days (0: every violation).
QUALITY_PERIODS = (7, 30, 90, 0)


def quality_period(request: HttpRequest) -> int:
    raw = request.GET.get("period", "")
    return int(raw) if raw.isdigit() and int(raw) in QUALITY_PERIODS else 30


class GuardrailDiffView(GuardrailPageMixin, TemplateView):
    """The difference between two revisions of a guardrail (`?from=N&to=M`)."""

    template_name = "guardrails/guardrail_diff.html"

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        guardrail = self.live_guardrail(kwargs["guardrail_id"])
        newest = guardrail.revision
        to_number = self.number("to", newest)
        from_number = self.number("from", max(to_number - 1, 1))
        found = {r.number: r for r in guardrail.revisions.filter(number__in={from_number, to_number})}
        if from_number not in found or to_number not in found:
            raise Http404("no such revision")
        old, new = found[from_number], found[to_number]
        labels = revision_authors([old, new], self.caller)
        old.created_by_label, new.created_by_label = labels[old.pk], labels[new.pk]
        return {
            **super().get_context_data(**kwargs),
            "guardrail": guardrail,
            "old": old,
            "new": new,
            "rows": document_diff(old.document, new.document),
            "can_author": self.can_author,
            "revision_numbers": list(range(newest, 0, -1)),
        }

    def number(self, name: str, default: int) -> int:
        raw = self.request.GET.get(name, "")
        return int(raw) if raw.isdigit() else default


# ---------------------------------------------------------------------------- changes


class GuardrailToggleView(GuardrailPageMixin, View):
    """Switch a guardrail on or off (the console's switch: no new revision)."""

    needs_author = True

    def post(self, request: HttpRequest, guardrail_id: str) -> HttpResponse:
        guardrail = self.writable_guardrail(guardrail_id)
        set_enabled(guardrail, request.POST.get("enabled") == "true")
        state = "enabled" if guardrail.enabled else "disabled"
        messages.success(request, f"{guardrail.guardrail_id} is {state}.")
        return HttpResponseRedirect(reverse("guardrail-detail", args=[guardrail.guardrail_id]))


class GuardrailShadowView(GuardrailPageMixin, View):
    """Put an llm-judge guardrail in shadow (with a sampling rate), or promote it to enforced."""

    needs_author = True

    def post(self, request: HttpRequest, guardrail_id: str) -> HttpResponse:
        from guardrails.api.quality import shadow_request
        from kindgi_console.api import ApiError

        guardrail = self.writable_guardrail(guardrail_id)
        shadow = request.POST.get("shadow") == "true"
        raw = request.POST.get("sample_percent", "").strip()
        try:
            rate = float(raw) / 100 if raw else None
            set_shadow(guardrail, *shadow_request({"shadow": shadow, "sampleRate": rate}, guardrail.kind))
        except (ValueError, ApiError) as error:
            messages.error(request, f"Not changed: {getattr(error, 'detail', error)}")
            return HttpResponseRedirect(reverse("guardrail-detail", args=[guardrail.guardrail_id]))
        messages.success(request, f"{guardrail.guardrail_id} is in shadow: judged and recorded, never halting, "
                                  "never a violation." if shadow else f"{guardrail.guardrail_id} is enforced.")
        return HttpResponseRedirect(reverse("guardrail-detail", args=[guardrail.guardrail_id]))


class GuardrailDeleteView(GuardrailPageMixin, View):
    """Delete a guardrail; its revisions, results and violations stay."""

    needs_author = True

    def post(self, request: HttpRequest, guardrail_id: str) -> HttpResponse:
        guardrail = self.writable_guardrail(guardrail_id)
        delete_guardrail(guardrail)
        messages.success(request, f"{guardrail.guardrail_id} was deleted; its history is kept.")
        return HttpResponseRedirect(reverse("guardrail-list"))


class GuardrailRestoreView(GuardrailPageMixin, View):
    """Make a new revision whose document is an older revision's; history is never rewritten."""

    needs_author = True

    def post(self, request: HttpRequest, guardrail_id: str, number: int) -> HttpResponse:
        guardrail = self.writable_guardrail(guardrail_id)
        old = get_object_or_404(guardrail.revisions, number=number)
        registration = register_document(old.document)
        if not registration.valid:
            problems = "; ".join(f"{issue.path or '/'}: {issue.message}" for issue in registration.errors)
            messages.error(request, f"Revision {number} no longer registers here, nothing was saved: {problems}")
        else:
            try:
                saved = save_guardrail(dict(old.document), self.author(), owner=guardrail.tenant)
            except OwnershipError as error:
                messages.error(request, f"Revision {number} cannot be restored, nothing was saved: {error}")
            else:
                messages.success(request, f"Revision {number} restored as revision {saved.revision}.")
        return HttpResponseRedirect(reverse("guardrail-detail", args=[guardrail.guardrail_id]))


class GuardrailEditorView(GuardrailPageMixin, TemplateView):
    """Create or edit a guardrail with the schema-driven editor (the authoring bundle)."""

    template_name = "guardrails/guardrail_editor.html"
    needs_author = True

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        guardrail_id = kwargs.get("guardrail_id")
        guardrail = self.writable_guardrail(guardrail_id) if guardrail_id else None
        initial = dict(guardrail.document) if guardrail else self.new_document()
        save_url = reverse("api-guardrails")
        tenant = current_tenant(self.request)
        if guardrail is None and tenant is not None and not self.caller.is_console_admin():
            save_url += "?" + urlencode({"tenant": tenant.slug})
        if guardrail is not None:
            save_url = reverse("api-guardrail", args=[guardrail.guardrail_id])
        return {
            **super().get_context_data(**kwargs),
            "guardrail": guardrail,
            "initial": initial,
            "save_url": save_url,
            "save_method": "PUT" if guardrail else "POST",
            "after_save_url": reverse("guardrail-detail", args=["__id__"]),
            "cancel_url": (reverse("guardrail-detail", args=[guardrail.guardrail_id])
                           if guardrail else reverse("guardrail-list")),
        }

    @staticmethod
    def new_document() -> dict[str, Any]:
        """What a new guardrail starts from: the most common shape, a zero-llm check that logs."""
        return {"kind": "zero-llm", "action": {"on-violation": "log-only"}, "severity": "warn"}


# ---------------------------------------------------------------------------- import / export


class GuardrailImportView(GuardrailPageMixin, TemplateView):
    """Upload guardrail files; each guardrail is validated and the valid ones saved."""

    template_name = "guardrails/guardrail_import.html"
    needs_author = True

    def post(self, request: HttpRequest) -> HttpResponse:
        files = request.FILES.getlist("files")
        if not files:
            return render(request, self.template_name, {"form_error": "Choose one or more JSON files."},
                          status=400)
        tenant = current_tenant(request)
        try:  # console admins import console-wide guardrails, others the current tenant's
            owner = None if self.caller.is_console_admin() else self.caller.guardrail_owner(
                tenant.slug if tenant is not None else None)
        except TenantDenied as denied:
            return render(request, self.template_name, {"form_error": f"{denied}: switch to a "
                          "tenant you author for."}, status=403)
        reports = import_files(files, self.author(), owner, self.caller)
        saved = sum(1 for f in reports for g in f.guardrails if g.status in ("created", "updated"))
        status = 200 if all(report.ok for report in reports) else 400
        return render(request, self.template_name, {"reports": reports, "saved": saved}, status=status)


class GuardrailExportView(GuardrailPageMixin, View):
    """Download the wire JSON: `?guardrail=<id>` for one document, else every enabled one."""

    def get(self, request: HttpRequest) -> HttpResponse:
        guardrail_id = request.GET.get("guardrail")
        if guardrail_id:
            body: object = self.live_guardrail(guardrail_id).document
            filename = f"{guardrail_id}.json"
        else:
            rows = self.visible().filter(enabled=True).order_by("guardrail_id")
            body = [enforced_document(row.document, owner_slug(row)) for row in rows]
            filename = "guardrails.json"
        response = HttpResponse(pretty_json(body) + "\n", content_type="application/json")
        response["Content-Disposition"] = f'attachment; filename="{_safe_filename(filename)}"'
        return response


def _safe_filename(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name)

