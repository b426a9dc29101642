"""The guardrail pages: revision diff, authoring, switching, import and export.

A guardrail belongs to one tenant or to the whole console, as in the REST API: a person
sees the console-wide guardrails and those of the tenants they read (another tenant's is a
404), changes those of the tenants they author for, and only a superuser changes the
console-wide ones. The list and the detail page, which show what the traces say of each
guardrail (violations, results, spend, quality), are traces.review.guardrail_views.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.mixins import LoginRequiredMixin
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import get_object_or_404, render
from django.urls import reverse
from django.utils.http import urlencode
from django.views import View
from django.views.generic import TemplateView

from guardrails.engine.stages import validate_stages
from guardrails.models import Guardrail
from guardrails.pages import document_diff, import_files, pretty_json
from guardrails.services import (
    Author,
    OwnershipError,
    delete_guardrail,
    enforced_document,
    guardrail_stages,
    owner_slug,
    register_document,
    revision_authors,
    save_guardrail,
    set_enabled,
    set_fail_mode,
    set_shadow,
    set_stages,
)
from kindgi_console.tenancy.scoping import Caller, TenantDenied, current_tenant


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
    """Put a guardrail in shadow (with a sampling rate), or promote its shadow revision to
    enforced (audited as `guardrail.promote`)."""

    needs_author = True

    def post(self, request: HttpRequest, guardrail_id: str) -> HttpResponse:
        from guardrails.api.shadow import shadow_request
        from kindgi_console.api import ApiError

        guardrail = self.writable_guardrail(guardrail_id)
        shadow = request.POST.get("shadow") == "true"
        raw = request.POST.get("sample_percent", "").strip()
        try:
            rate = float(raw) / 100 if raw else None
            set_shadow(guardrail, *shadow_request({"shadow": shadow, "sampleRate": rate}))
        except (ValueError, ApiError) as error:
            messages.error(request, f"Not changed: {getattr(error, 'detail', error)}")
            return HttpResponseRedirect(reverse("guardrail-detail", args=[guardrail.guardrail_id]))
        messages.success(
            request,
            f"{guardrail.guardrail_id} is in shadow: evaluated and recorded, never halting, never a violation."
            if shadow
            else f"{guardrail.guardrail_id} revision {guardrail.revision} is enforced.",
        )
        return HttpResponseRedirect(reverse("guardrail-detail", args=[guardrail.guardrail_id]))


class GuardrailStagesView(GuardrailPageMixin, View):
    """Set the stages of a turn at which a guardrail applies at runtime, or its check's defaults."""

    needs_author = True

    def post(self, request: HttpRequest, guardrail_id: str) -> HttpResponse:
        guardrail = self.writable_guardrail(guardrail_id)
        chosen = None if request.POST.get("defaults") == "true" else request.POST.getlist("stages")
        issues = validate_stages(chosen, "/stages") if chosen is not None else []
        if issues:
            messages.error(request, f"Not changed: {issues[0].message}")
        else:
            set_stages(guardrail, chosen)
            messages.success(request, f"{guardrail.guardrail_id} applies at: {', '.join(guardrail_stages(guardrail))}.")
        return HttpResponseRedirect(reverse("guardrail-detail", args=[guardrail.guardrail_id]) + "#stages")


class GuardrailFailModeView(GuardrailPageMixin, View):
    """Set what an error of a guardrail does to a turn: pass, or fail closed (halt guardrails)."""

    needs_author = True

    def post(self, request: HttpRequest, guardrail_id: str) -> HttpResponse:
        from guardrails.api.fail_mode import fail_mode_request
        from kindgi_console.api import ApiError

        guardrail = self.writable_guardrail(guardrail_id)
        try:
            set_fail_mode(
                guardrail, fail_mode_request({"onError": request.POST.get("on_error")}, guardrail.on_violation)
            )
        except ApiError as error:
            messages.error(request, f"Not changed: {error.detail}")
            return HttpResponseRedirect(reverse("guardrail-detail", args=[guardrail.guardrail_id]))
        messages.success(
            request,
            f"An error of {guardrail.guardrail_id} now halts the turn."
            if guardrail.on_error == "halt"
            else f"An error of {guardrail.guardrail_id} now lets the turn go on.",
        )
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
            "try_time_limit_s": settings.KINDGI_EVALUATE_TIME_LIMIT_S,
            # The revision the editor was opened on: its save sends it as If-Match, so that a
            # save after someone else's is refused (412) and shown, not applied over theirs.
            "if_match": f'"{guardrail.guardrail_id}@{guardrail.revision}"' if guardrail else "",
            "after_save_url": reverse("guardrail-detail", args=["__id__"]),
            "cancel_url": (
                reverse("guardrail-detail", args=[guardrail.guardrail_id]) if guardrail else reverse("guardrail-list")
            ),
            # The console's runtime state beside the document: set after the document is saved.
            "runtime": {
                "stages": list(guardrail.stages) if guardrail and guardrail.stages is not None else None,
                "onError": guardrail.on_error if guardrail else "pass",
                "stagesUrl": reverse("api-guardrail-stages", args=["__id__"]),
                "failModeUrl": reverse("api-guardrail-fail-mode", args=["__id__"]),
            },
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
            return render(request, self.template_name, {"form_error": "Choose one or more JSON files."}, status=400)
        tenant = current_tenant(request)
        try:  # console admins import console-wide guardrails, others the current tenant's
            owner = (
                None
                if self.caller.is_console_admin()
                else self.caller.guardrail_owner(tenant.slug if tenant is not None else None)
            )
        except TenantDenied as denied:
            return render(
                request, self.template_name, {"form_error": f"{denied}: switch to a tenant you author for."}, status=403
            )
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
