"""Pages of trace uploads: the list, the upload form, an upload with its progress and bad lines."""

from __future__ import annotations

import contextlib
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, cast

from django.core.files import File
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect, JsonResponse
from django.shortcuts import render
from django.urls import reverse
from django.utils import timezone
from django.views.generic import DetailView, FormView, ListView

from kindgi_console.paging import keyset_page
from kindgi_console.tenancy.models import Membership, Tenant
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


#: The session's file kept from a refused try: `{"name", "size", "stored"}`.
HELD_UPLOAD = "kindgi_held_upload"
HELD_DIR = "held-uploads"
HELD_FOR = timedelta(days=1)


@dataclass(frozen=True)
class HeldFile:
    """A file of a refused upload, kept in the upload storage so that the retry needs no new choice."""

    name: str
    size: int
    stored: str

    @staticmethod
    def storage() -> Any:
        return Upload._meta.get_field("file").storage

    @classmethod
    def of(cls, request: HttpRequest) -> HeldFile | None:
        kept = request.session.get(HELD_UPLOAD)
        if not isinstance(kept, dict):
            return None
        held = cls(str(kept.get("name", "")), int(kept.get("size", 0)), str(kept.get("stored", "")))
        if not held.stored.startswith(f"{HELD_DIR}/") or not cls.storage().exists(held.stored):
            request.session.pop(HELD_UPLOAD, None)
            return None
        return held

    @classmethod
    def drop_stale(cls, now: datetime) -> None:
        """Let go of the files kept longer than HELD_FOR (their retry never came), a bounded few."""
        storage = cls.storage()
        if not storage.exists(HELD_DIR):
            return
        folders, _ = storage.listdir(HELD_DIR)
        for folder in folders[:200]:
            place = f"{HELD_DIR}/{folder}"
            for name in storage.listdir(place)[1][:10]:
                with contextlib.suppress(OSError):
                    if now - storage.get_modified_time(f"{place}/{name}") > HELD_FOR:
                        storage.delete(f"{place}/{name}")

    @classmethod
    def keep(cls, request: HttpRequest, file: Any) -> HeldFile | None:
        """Store `file` in place of the session's earlier kept file; None when there is no space."""
        cls.drop(request)
        cls.drop_stale(timezone.now())
        name = (file.name or "traces.jsonl").rsplit("/", 1)[-1][:200]
        try:
            stored = cls.storage().save(f"{HELD_DIR}/{secrets.token_hex(16)}/{name}", file)
        except OSError as error:
            if error.errno in NO_SPACE:
                return None
            raise
        held = cls(name, int(file.size or 0), str(stored))
        request.session[HELD_UPLOAD] = {"name": held.name, "size": held.size, "stored": held.stored}
        return held

    @classmethod
    def drop(cls, request: HttpRequest) -> None:
        held = cls.of(request)
        request.session.pop(HELD_UPLOAD, None)
        if held is not None:
            cls.storage().delete(held.stored)

    def open(self) -> File[bytes]:
        return File(self.storage().open(self.stored, "rb"), name=self.name)


class UploadCreateView(TenantScopedMixin, FormView):  # type: ignore[type-arg]
    """Upload a file of traces; it is stored as streamed and processed in the background.

    Someone who may upload to no tenant reads why instead of a form (403). A try refused for
    another field keeps its file on the server (`HeldFile`): the form says so and uses it
    unless another file is chosen."""

    form_class = UploadForm
    template_name = "traces/upload_form.html"

    def dispatch(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if request.user.is_authenticated and not writable_tenants(request.user):
            memberships = Membership.objects.filter(user=request.user).select_related("tenant").order_by("tenant__slug")
            roles = [(m.tenant.name or m.tenant.slug, m.role) for m in memberships[:50]]
            context = {"roles": roles, "nav_active": "uploads"}
            return render(request, "traces/upload_not_allowed.html", context, status=403)
        return cast(HttpResponse, super().dispatch(request, *args, **kwargs))

    def get_form_kwargs(self) -> dict[str, Any]:
        kwargs = super().get_form_kwargs()
        kwargs["tenants"] = writable_tenants(self.request.user)
        kwargs["held"] = HeldFile.of(self.request)
        return kwargs

    def get_initial(self) -> dict[str, Any]:
        """The current tenant when it may be written to, else the only one that may."""
        writable = [tenant.slug for tenant in writable_tenants(self.request.user)]
        current = self.tenant.slug if self.tenant else None
        if current in writable:
            return {"tenant": current}
        return {"tenant": writable[0] if len(writable) == 1 else None}

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        kwargs.setdefault("held", HeldFile.of(self.request))
        return super().get_context_data(**kwargs)

    def form_invalid(self, form: UploadForm) -> HttpResponse:
        chosen = form.new_file()
        held = HeldFile.keep(self.request, chosen) if chosen else HeldFile.of(self.request)
        return self.render_to_response(self.get_context_data(form=form, held=held))

    def post(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        try:
            return super().post(request, *args, **kwargs)
        except OSError as error:  # the request's file could not even be spooled to a temporary file
            if error.errno not in NO_SPACE:
                raise
            return self.no_space(None)

    def form_valid(self, form: UploadForm) -> HttpResponse:
        held: HeldFile | None = None if form.new_file() else form.held
        file = form.cleaned_data["file"] if held is None else held.open()
        try:
            upload = save_upload(
                file, form.cleaned_data["tenant"], self.request.user, evaluate_after=form.cleaned_data["evaluate_after"]
            )
        except NoSpace:
            return self.no_space(form)
        finally:
            if held is not None:
                file.close()
        HeldFile.drop(self.request)
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
