"""Pages of trace uploads: the list, the upload form, an upload with its progress and bad lines."""

from __future__ import annotations

from typing import Any, cast

from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect, JsonResponse
from django.urls import reverse
from django.views.generic import DetailView, FormView, ListView

from kindgi_console.paging import keyset_page
from kindgi_console.tenancy.models import Tenant
from kindgi_console.tenancy.scoping import Caller
from kindgi_console.tenancy.views import TenantScopedMixin
from traces.ingest.forms import UploadForm
from traces.ingest.uploads import NO_SPACE, NoSpace, save_upload
from traces.models import Upload
from traces.store import heartbeat


class UploadListView(TenantScopedMixin, ListView):  # type: ignore[type-arg]
    """The current tenant's uploads, newest first."""

    model = Upload
    template_name = "traces/upload_list.html"

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        uploads = cast(QuerySet[Upload], self.object_list)
        page = keyset_page(self.request, uploads.select_related("uploaded_by"), "created_at")
        kwargs.update(
            uploads=page.rows,
            next_url=page.next_url,
            previous_url=page.previous_url,
            can_upload=bool(writable_tenants(self.request.user)),
        )
        return super().get_context_data(**kwargs)


def writable_tenants(user: Any) -> list[Tenant]:
    """The tenants the person may store traces in (author or admin; every one, for a superuser)."""
    return list(Caller(user=user).tenants("ingest").order_by("slug"))


class UploadCreateView(TenantScopedMixin, FormView):  # type: ignore[type-arg]
    """Upload a file of traces; it is stored as streamed and processed in the background."""

    form_class = UploadForm
    template_name = "traces/upload_form.html"

    def get_form_kwargs(self) -> dict[str, Any]:
        kwargs = super().get_form_kwargs()
        kwargs["tenants"] = writable_tenants(self.request.user)
        return kwargs

    def get_initial(self) -> dict[str, Any]:
        return {"tenant": self.tenant.slug if self.tenant else None}

    def post(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        try:
            return super().post(request, *args, **kwargs)
        except OSError as error:  # the request's file could not even be spooled to a temporary file
            if error.errno not in NO_SPACE:
                raise
            return self.no_space(None)

    def form_valid(self, form: UploadForm) -> HttpResponse:
        try:
            upload = save_upload(
                form.cleaned_data["file"],
                form.cleaned_data["tenant"],
                self.request.user,
                evaluate_after=form.cleaned_data["evaluate_after"],
            )
        except NoSpace:
            return self.no_space(form)
        return HttpResponseRedirect(reverse("upload-detail", args=[upload.pk]))

    def no_space(self, form: UploadForm | None) -> HttpResponse:
        """507 Insufficient Storage, nothing kept: JSON to a client that asks for it, else the
        form again with the reason."""
        if self.request.get_preferred_type(["text/html", "application/json"]) == "application/json":
            return JsonResponse({"errors": [{"path": "/file", "message": NoSpace.message}]}, status=507)
        form = form if form is not None else self.get_form_class()(tenants=writable_tenants(self.request.user))
        form.add_error(None, NoSpace.message)
        response = self.render_to_response(self.get_context_data(form=form))
        response.status_code = 507
        return response


class UploadDetailView(TenantScopedMixin, DetailView):  # type: ignore[type-arg]
    """One upload: progress, what became of its traces, its bad lines."""

    model = Upload
    template_name = "traces/upload_detail.html"
    context_object_name = "upload"

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        kwargs["status_url"] = f"/api/v1/uploads/{self.object.pk}"
        kwargs["worker_missing"] = None if self.object.is_final else heartbeat.worker_missing()
        return super().get_context_data(**kwargs)
