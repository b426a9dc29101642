"""REST endpoints of guardrails: list, create, read, replace, delete, their revisions, the export.

A guardrail belongs to one tenant or to the whole console (`Guardrail.tenant`): a caller
reads the console-wide ones and those of its tenants, and writes those of the tenants it
authors for; console admins (superusers, keys bound to no tenant) write every one.
Another tenant's guardrail is a 404, a console-wide one that the caller may not write a 403.
"""

from __future__ import annotations

import re
from typing import Any, cast

from django.http import Http404
from django.utils.http import parse_etags
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response

from guardrails.api import serializers
from guardrails.api.serializers import (
    DOCUMENT_RESPONSE,
    ENABLED_PARAM,
    ETAG_HEADER,
    GUARDRAIL_BODY,
    IF_MATCH_PARAM,
    REVISION_CONFLICT_RESPONSE,
    SHADOW_PARAM,
    TENANT_PARAM,
)
from guardrails.engine.types import Issue
from guardrails.models import Guardrail, GuardrailRevision
from guardrails.pages import document_diff
from guardrails.services import (
    Author,
    RevisionConflict,
    check_owner,
    delete_guardrail,
    enforced_document,
    owner_slug,
    register_document,
    revision_authors,
    save_guardrail,
)
from kindgi_console.api import ApiError, ConsoleAPIView, read_json_body
from kindgi_console.openapi import error_responses, ref
from kindgi_console.tenancy.scoping import TenantScopedQuerySet


def registered_document(payload: object) -> dict[str, Any]:
    """The payload if it is a guardrail that can be defined; else 400 with every error."""
    registration = register_document(payload)
    if not registration.valid:
        raise ApiError(registration.errors)
    assert isinstance(payload, dict)
    return payload


def enabled_flag(request: Request, name: str = "enabled") -> bool | None:
    """A true/false query parameter (`enabled`, `shadow`); None when absent."""
    raw = request.query_params.get(name)
    if raw is None:
        return None
    if raw.lower() not in ("true", "false", "1", "0"):
        raise ApiError([Issue(f"/{name}", f"{name} is true or false")])
    return raw.lower() in ("true", "1")


class GuardrailBaseView(ConsoleAPIView):
    queryset = Guardrail.objects.live().select_related("tenant")
    serializer_class = serializers.GuardrailSerializer
    ordering_field = "updated_at"

    def get_queryset(self) -> Any:
        return cast(TenantScopedQuerySet[Guardrail], super().get_queryset()).for_caller(self.caller)

    def author(self) -> Author:
        return Author(user=self.caller.user_or_none, label=self.caller.label)

    def save(
        self,
        document: dict[str, Any],
        *,
        enabled: bool | None,
        owner: Any = None,
        based_on: frozenset[int] | None = None,
    ) -> Guardrail:
        shadow = enabled_flag(self.request, "shadow")
        return save_guardrail(document, self.author(), enabled=enabled, owner=owner, based_on=based_on, shadow=shadow)


class GuardrailListView(GuardrailBaseView):
    """`GET guardrails` lists; `POST guardrails` creates (a deleted id comes back)."""

    scopes = {"GET": "read", "POST": "author"}

    @extend_schema(
        operation_id="guardrails_list",
        responses={200: serializers.GuardrailSerializer(many=True), **error_responses(400, 401, 403)},
    )
    def get(self, request: Request) -> Response:
        page = self.paginate_queryset(self.get_queryset())
        return self.get_paginated_response(self.get_serializer(page, many=True).data)

    @extend_schema(
        operation_id="guardrails_create",
        request=GUARDRAIL_BODY,
        parameters=[ENABLED_PARAM, SHADOW_PARAM, TENANT_PARAM, ETAG_HEADER],
        responses={201: DOCUMENT_RESPONSE, **error_responses(400, 401, 403, 409, 413, 415, 429)},
    )
    def post(self, request: Request) -> Response:
        enabled = enabled_flag(request)
        owner = self.caller.guardrail_owner(request.query_params.get("tenant") or None)
        document = registered_document(read_json_body(request))
        if self.get_queryset().filter(guardrail_id=document["id"]).exists():
            raise ApiError(
                [Issue("/id", f"guardrail {document['id']!r} already exists: replace it with PUT")],
                status.HTTP_409_CONFLICT,
            )
        check_owner(document["id"], owner)
        guardrail = self.save(document, enabled=True if enabled is None else enabled, owner=owner)
        return document_response(guardrail, status.HTTP_201_CREATED)


def etag(guardrail: Guardrail) -> str:
    """The ETag of the guardrail's current revision, which If-Match names back."""
    return f'"{guardrail.guardrail_id}@{guardrail.revision}"'


def document_response(guardrail: Guardrail, code: int = 200) -> Response:
    response = Response(guardrail.document, status=code)
    response["ETag"] = etag(guardrail)
    return response


_REVISION_DIGITS = re.compile(r"[0-9]{1,9}")


def if_match_revisions(request: Request, guardrail_id: str) -> frozenset[int] | None:
    """The revisions a request's If-Match names for this guardrail; None without the header
    or with `*` (any revision: the view has found the guardrail). Strong comparison (RFC
    9110): a weak tag, another guardrail's, or a malformed header names none."""
    raw = request.headers.get("If-Match")
    if raw is None:
        return None
    tags = parse_etags(raw)
    if tags == ["*"]:
        return None
    prefix = f'"{guardrail_id}@'
    revisions = {
        int(tag[len(prefix) : -1])
        for tag in tags
        if tag.startswith(prefix) and tag.endswith('"') and _REVISION_DIGITS.fullmatch(tag[len(prefix) : -1])
    }
    return frozenset(revisions)


def conflict_response(conflict: RevisionConflict, caller: Any) -> Response:
    """412: the change was based on a revision that is no longer current. The body holds the
    current revision (who saved it, as the caller may see them) and, when one earlier
    revision was named, what changed since (the revision diff page's rows)."""
    current = conflict.current
    if current.pk is None or current.deleted_at is not None:
        raise Http404
    wanted = {current.revision, *conflict.based_on}
    found = {row.number: row for row in current.revisions.filter(number__in=wanted)}
    newest = found[current.revision]
    saved_by = revision_authors([newest], caller)[newest.pk] or "someone"
    based = sorted(conflict.based_on)
    since = f"revision {based[0]}" if len(based) == 1 else "the revision this change was made on"
    message = (
        f"guardrail {current.guardrail_id!r} was saved as revision {current.revision} by {saved_by} "
        f"since {since}: nothing was saved. Merge your change into revision {current.revision} "
        f"and send it with If-Match: {etag(current)}"
    )
    body: dict[str, Any] = {
        "errors": [{"path": "", "message": message}],
        "current": {
            "revision": current.revision,
            "etag": etag(current),
            "document": current.document,
            "savedBy": saved_by,
            "savedAt": newest.created_at.isoformat(),
        },
    }
    if len(based) == 1 and based[0] in found:
        rows = document_diff(found[based[0]].document, newest.document)
        body["changes"] = {
            "from": based[0],
            "to": current.revision,
            "lines": [{"kind": row.kind, "old": row.old, "new": row.new, "text": row.text} for row in rows],
        }
    response = Response(body, status=status.HTTP_412_PRECONDITION_FAILED)
    response["ETag"] = etag(current)
    return response


class GuardrailDetailView(GuardrailBaseView):
    """`GET`, `PUT`, `DELETE guardrails/{id}`; each PUT makes a revision."""

    scopes = {"GET": "read", "PUT": "author", "DELETE": "author"}

    def get_object(self) -> Guardrail:
        guardrail: Guardrail | None = self.get_queryset().filter(guardrail_id=self.kwargs["guardrail_id"]).first()
        if guardrail is None:
            raise Http404
        return guardrail

    def writable_object(self) -> Guardrail:
        """The guardrail, if the caller may change it: 404 unseen, 403 seen but not its own."""
        guardrail = self.get_object()
        if not Guardrail.objects.for_caller(self.caller, "author").filter(pk=guardrail.pk).exists():
            raise ApiError(
                [Issue("", "a console-wide guardrail is changed only by console admins")], status.HTTP_403_FORBIDDEN
            )
        return guardrail

    # 405: the path is another route's, which answers the methods it does not take with 405:
    # `validate`, `export`, `try` or `preview`, ids the console refuses at save (400 at /id,
    # services.ROUTE_IDS), so no guardrail has one; or an id stored before the id alphabet
    # that holds a "/" and ends in another route (`/revisions`, `/shadow`, `/quality`).
    @extend_schema(
        operation_id="guardrails_read",
        description=(
            "The guardrail's current document. An id is never the name of another route under "
            "guardrails/ (validate, export, try, preview, new, import): the console refuses those "
            "ids at save; such a path is that route's (405 for a method it does not take)."
        ),
        parameters=[ETAG_HEADER],
        responses={200: DOCUMENT_RESPONSE, **error_responses(401, 403, 404, 405)},
    )
    def get(self, request: Request, guardrail_id: str) -> Response:
        return document_response(self.get_object())

    @extend_schema(
        description=(
            "Replace the guardrail's document with a new revision. With If-Match (the ETag that GET "
            "answered), the change is saved only if that revision is still the current one, else 412 "
            "with the current revision and what changed since: of two authors saving on the same "
            "revision, the second is told instead of overwriting the first."
        ),
        request=GUARDRAIL_BODY,
        parameters=[ENABLED_PARAM, SHADOW_PARAM, IF_MATCH_PARAM, ETAG_HEADER],
        responses={
            200: DOCUMENT_RESPONSE,
            412: REVISION_CONFLICT_RESPONSE,
            **error_responses(400, 401, 403, 404, 405, 413, 415, 429),
        },
    )
    def put(self, request: Request, guardrail_id: str) -> Response:
        self.writable_object()
        based_on = if_match_revisions(request, guardrail_id)
        enabled = enabled_flag(request)
        document = registered_document(read_json_body(request))
        if document["id"] != guardrail_id:
            raise ApiError(
                [Issue("/id", f"the document's id must be {guardrail_id!r}, the guardrail this request replaces")]
            )
        try:
            return document_response(self.save(document, enabled=enabled, based_on=based_on))
        except RevisionConflict as conflict:
            return conflict_response(conflict, self.caller)

    @extend_schema(responses={204: None, **error_responses(401, 403, 404, 405)})
    def delete(self, request: Request, guardrail_id: str) -> Response:
        delete_guardrail(self.writable_object())
        return Response(status=status.HTTP_204_NO_CONTENT)


class GuardrailRevisionListView(ConsoleAPIView):
    """`GET guardrails/{id}/revisions`: every saved version, newest first."""

    serializer_class = serializers.RevisionSerializer

    queryset = GuardrailRevision.objects.all()
    filter_backends: list[Any] = []

    def get_queryset(self) -> Any:
        return super().get_queryset().filter(guardrail__guardrail_id=self.kwargs["guardrail_id"])

    @extend_schema(
        operation_id="guardrail_revisions_list",
        responses={200: serializers.RevisionSerializer(many=True), **error_responses(400, 401, 403, 404)},
    )
    def get(self, request: Request, guardrail_id: str) -> Response:
        if not Guardrail.objects.for_caller(self.caller).filter(guardrail_id=guardrail_id).exists():
            raise Http404
        page = self.paginate_queryset(self.get_queryset())
        assert page is not None  # the keyset pagination always pages
        labels = revision_authors(page, self.caller)
        data = self.get_serializer(page, many=True).data
        for row, revision in zip(data, page, strict=True):
            row["createdBy"] = labels[revision.pk]
        return self.get_paginated_response(data)


class GuardrailExportView(ConsoleAPIView):
    """`GET guardrails/export`: every enabled guardrail's wire document, as CI downloads it."""

    filter_backends: list[Any] = []
    pagination_class = None

    @extend_schema(
        responses={
            200: OpenApiResponse({"type": "array", "items": ref("GuardrailDocument")}),
            **error_responses(401, 403),
        }
    )
    def get(self, request: Request) -> Response:
        """Console-wide guardrails and the caller's tenants' own; a tenant's guardrail with
        `scope.tenants` naming it, so that CI applies it to that tenant's traces only."""
        rows = Guardrail.objects.enabled().for_caller(self.caller).select_related("tenant")
        return Response([enforced_document(row.document, owner_slug(row)) for row in rows.order_by("guardrail_id")])
