"""Pages of calibration: draw a sample from a guardrail's page, label it in a queue."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import get_object_or_404, render
from django.views.generic import View

from guardrails.models import Guardrail
from kindgi_console.tenancy.scoping import Caller, current_rows, may_in_current_tenant
from kindgi_console.tenancy.views import TenantScopedMixin
from traces.models import CalibrationItem, CalibrationSample
from traces.review import calibration
from traces.runs.evaluations import RunRequestError
from traces.store import timeline


def can_label(request: HttpRequest) -> bool:
    """Reviewers (and authors) of the current tenant label and draw samples."""
    return may_in_current_tenant(request, "review")


class CalibrateView(TenantScopedMixin, View):
    """POST from a guardrail's page: draw a calibration sample of `size` traces, then label it."""

    model = CalibrationSample

    def post(self, request: HttpRequest, guardrail_id: str) -> HttpResponse:
        if not can_label(request):
            raise PermissionDenied("calibrating needs a reviewer's role in this tenant")
        guardrail = get_object_or_404(
            Guardrail.objects.live().for_caller(Caller(user=request.user)), guardrail_id=guardrail_id
        )
        raw = request.POST.get("size", "")
        try:
            tenant = self.tenant
            assert tenant is not None  # can_label needs a role in it
            sample = calibration.create_sample(
                tenant, guardrail, int(raw) if raw.isdigit() else raw, request.user.get_username()
            )
        except RunRequestError as error:
            messages.error(request, f"No sample drawn: {error}")
            return HttpResponseRedirect(f"/guardrails/{guardrail.guardrail_id}/#calibration")
        return HttpResponseRedirect(f"/calibrations/{sample.pk}/")


class LabelView(TenantScopedMixin, View):
    """The labelling queue: the next trace the person has not labelled (each reviewer labels
    the sample on their own), with the rubric, not the guardrail's verdict."""

    model = CalibrationSample

    def sample(self, pk: int) -> CalibrationSample:
        samples: QuerySet[CalibrationSample] = current_rows(self.request, CalibrationSample.objects)
        return get_object_or_404(samples.select_related("guardrail", "revision"), pk=pk)

    def get(self, request: HttpRequest, pk: int) -> HttpResponse:
        sample = self.sample(pk)
        who = request.user.get_username()
        item = calibration.left_for(sample, who).select_related("trace").first()
        if item is None:
            return HttpResponseRedirect(f"/guardrails/{sample.guardrail.guardrail_id}/#calibration")
        document = item.trace.document if isinstance(item.trace.document, dict) else {}
        labelled = sample.size - calibration.left_for(sample, who).count()
        return render(
            request,
            "traces/calibration_label.html",
            {
                "sample": sample,
                "item": item,
                "labelled": labelled,
                "position": labelled + 1,
                "steps": timeline.steps(document, withheld=item.trace.withheld),
                "criteria": (sample.revision.document.get("config") or {}).get("criteria", ""),
                "can_label": can_label(request),
                "nav_active": "guardrails",
            },
        )

    def post(self, request: HttpRequest, pk: int) -> HttpResponse:
        if not can_label(request):
            raise PermissionDenied("labelling needs a reviewer's role in this tenant")
        sample = self.sample(pk)
        item = get_object_or_404(CalibrationItem.objects.filter(sample=sample), pk=request.POST.get("item") or 0)
        try:
            calibration.label_item(item, request.POST.get("label"), request.user.get_username())
        except RunRequestError as error:
            messages.error(request, str(error))
        return HttpResponseRedirect(f"/calibrations/{sample.pk}/")


def latest_calibration(request: HttpRequest, guardrail: Guardrail) -> dict[str, Any] | None:
    """The newest sample of the guardrail in the current tenant, with its agreement."""
    samples = current_rows(request, CalibrationSample.objects)
    sample = samples.filter(guardrail=guardrail).select_related("guardrail", "revision").order_by("-pk").first()
    if sample is None:
        return None
    return {
        **calibration.sample_as_dict(sample),
        "leftForMe": calibration.left_for(sample, request.user.get_username()).count(),
    }
