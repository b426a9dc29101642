"""Pages of a guardrail preview: start one from a draft (the editor posts its draft here),
and watch it, then read what the draft changes."""

from __future__ import annotations

import json
from typing import Any, cast

from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.http.response import HttpResponseBase
from django.shortcuts import get_object_or_404, render
from django.views.generic import View

from guardrails.engine.types import Mode
from guardrails.models import Guardrail
from kindgi_console.tenancy.scoping import Caller, current_rows
from kindgi_console.tenancy.views import TenantScopedMixin
from traces.models import GuardrailPreview
from traces.runs import previews
from traces.runs.evaluations import RunRequestError
from traces.runs.views import can_evaluate, is_author

MAX_DRAFT = 256 * 1024


class PreviewCreateView(TenantScopedMixin, View):
    """GET: the draft (a guardrail's current document with `?guardrail=`) and the selection;
    POST `draft` (JSON) with filters: start the preview (a POST from the editor with only a
    draft shows the form filled in)."""

    model = GuardrailPreview

    def dispatch(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
        if request.user.is_authenticated and not can_evaluate(request):
            raise PermissionDenied("previewing needs a role in this tenant")
        return super().dispatch(request, *args, **kwargs)

    def get(self, request: HttpRequest) -> HttpResponse:
        wanted = request.GET.get("guardrail", "")
        # Only a guardrail this person reads: another tenant's is as none (no draft).
        visible = Guardrail.objects.live().for_caller(Caller(user=request.user))
        found = visible.filter(guardrail_id=wanted).first() if wanted else None
        draft = json.dumps(found.document, indent=2) if found is not None else ""
        return self.form(request, draft, {}, [])

    def post(self, request: HttpRequest) -> HttpResponse:
        text = request.POST.get("draft", "")
        filters = {name: request.POST.get(name, "").strip() for name in ("agent", "flow", "since", "until")}
        if "start" not in request.POST:
            return self.form(request, text, filters, [])
        if len(text) > MAX_DRAFT:
            return self.form(request, "", filters, [f"/guardrail: the draft is over {MAX_DRAFT} bytes"])
        try:
            draft = json.loads(text)
        except ValueError as error:
            return self.form(request, text, filters, [f"/guardrail: not JSON ({error})"])
        try:
            tenant = self.tenant
            assert tenant is not None  # can_evaluate needs a role in it
            preview = previews.create_preview(
                previews.PreviewRequest(
                    tenant=tenant,
                    draft=draft,
                    filters={k: v for k, v in filters.items() if v},
                    mode=cast(Mode, request.POST.get("mode", "ci")),
                    started_by=request.user,
                    label=request.user.get_username(),
                    by_author=is_author(request),
                )
            )
        except RunRequestError as error:
            return self.form(request, text, filters, [f"{i.path}: {i.message}" for i in error.issues])
        return HttpResponseRedirect(f"/guardrails/previews/{preview.pk}/")

    def form(self, request: HttpRequest, draft: str, filters: dict[str, str], errors: list[str]) -> HttpResponse:
        return render(
            request,
            "guardrails/preview_form.html",
            {
                "draft": draft,
                "filters": filters,
                "errors": errors,
                "judge_estimate": self.estimate(request, draft, filters),
                "days": previews.PREVIEW_DAYS,
                "most": previews.PREVIEW_MAX,
                "nav_active": "guardrails",
            },
        )

    def estimate(self, request: HttpRequest, draft: str, filters: dict[str, str]) -> dict[str, Any] | None:
        """The judge cost estimate of the preview about to start (None: no valid draft yet)."""
        if not draft.strip() or len(draft) > MAX_DRAFT or self.tenant is None:
            return None
        try:
            document = json.loads(draft)
            chosen = {name: value for name, value in filters.items() if value}
            mode = cast(Mode, request.POST.get("mode", "ci") if request.method == "POST" else "ci")
            estimate: dict[str, Any] = previews.draft_estimate(self.tenant, document, chosen, mode)["preview"]
        except (ValueError, RunRequestError):
            return None
        return estimate


class PreviewDetailView(TenantScopedMixin, View):
    """A preview's progress, then its newly failing and no longer failing traces."""

    model = GuardrailPreview

    def get(self, request: HttpRequest, pk: int) -> HttpResponse:
        previews_seen = current_rows(request, GuardrailPreview.objects)
        preview = get_object_or_404(previews_seen.select_related("tenant", "current"), pk=pk)
        return render(
            request,
            "guardrails/preview_detail.html",
            {"preview": preview, "data": previews.preview_as_dict(preview), "nav_active": "guardrails"},
        )
