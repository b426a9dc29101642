"""The API's policy, set once: authentication, permissions, pagination, throttling, errors.

Every view of /api/v1/ derives from `ConsoleAPIView`. Errors always have the shape
`{"errors": [{"path": "<JSON pointer>", "message": "…"}]}`; for a query parameter the
pointer is `/<name>`.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from datetime import datetime
from typing import Any

from django.conf import settings
from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.core.exceptions import RequestDataTooBig
from django.db.models import QuerySet
from django.http import Http404, HttpRequest, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from rest_framework import exceptions, status
from rest_framework.authentication import BaseAuthentication, SessionAuthentication
from rest_framework.generics import GenericAPIView
from rest_framework.negotiation import DefaultContentNegotiation
from rest_framework.pagination import BasePagination
from rest_framework.permissions import BasePermission
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.utils.urls import replace_query_param
from rest_framework.views import exception_handler as drf_exception_handler

from guardrails.engine.types import Issue, IssuesError
from kindgi_console import deadline, paging, replicas
from kindgi_console.jsonbody import JsonBodyError, parse_json
from kindgi_console.proxies import client_address
from kindgi_console.tenancy.keys import active_key_with
from kindgi_console.tenancy.models import ApiKey, hash_key
from kindgi_console.tenancy.scoping import Caller, TenantDenied, TenantScopedQuerySet
from kindgi_console.throttling import TokenBucketThrottle

# ---------------------------------------------------------------------------- errors


class ApiError(exceptions.APIException):
    """An error with explicit JSON pointers: raised by views, shaped by the handler."""

    status_code: int = status.HTTP_400_BAD_REQUEST
    default_detail = "invalid request"

    def __init__(self, issues: Sequence[Issue], status_code: int = 400) -> None:
        super().__init__(detail=issues[0].message if issues else self.default_detail)
        self.issues = list(issues)
        self.status_code = status_code


class PayloadTooLarge(exceptions.APIException):
    status_code = status.HTTP_413_REQUEST_ENTITY_TOO_LARGE
    default_detail = "the request body is over the limit"


def pointer(*parts: object) -> str:
    """A JSON pointer (RFC 6901) of the given reference tokens."""
    return "".join("/" + str(part).replace("~", "~0").replace("/", "~1") for part in parts)


def flatten_detail(detail: Any, path: str = "") -> list[dict[str, str]]:
    """DRF's nested error detail as a flat list of {path, message}."""
    if isinstance(detail, dict):
        errors: list[dict[str, str]] = []
        for key, value in detail.items():
            inner = path if key in ("non_field_errors", "detail") else path + pointer(key)
            errors.extend(flatten_detail(value, inner))
        return errors
    if isinstance(detail, list):
        if all(not isinstance(item, dict | list) for item in detail):
            return [{"path": path, "message": str(item)} for item in detail]
        errors = []
        for index, item in enumerate(detail):
            errors.extend(flatten_detail(item, path + pointer(index)))
        return errors
    return [{"path": path, "message": str(detail)}]


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    """Every error of the API in the one shape, whatever raised it.

    An `IssuesError` of a service (a run, a review, a guardrail's owner...) is answered
    with its issues and status: views let it through instead of catching it."""
    if isinstance(exc, RequestDataTooBig):
        exc = PayloadTooLarge(f"the request body is over the limit of {settings.KINDGI_MAX_REQUEST_BYTES} bytes")
    elif isinstance(exc, TenantDenied):
        exc = ApiError([Issue(pointer("tenant"), str(exc))], exc.status)
    elif isinstance(exc, IssuesError):  # a service's refusal, named field by field
        exc = ApiError(exc.issues, exc.status)
    response = drf_exception_handler(exc, context)
    if response is None:
        return None
    if isinstance(exc, deadline.DeadlineExceeded):
        response["Retry-After"] = str(deadline.RETRY_AFTER_S)
    if isinstance(exc, ApiError):
        errors = [issue.as_dict() for issue in exc.issues]
    elif isinstance(exc, exceptions.ValidationError):
        errors = flatten_detail(exc.detail)
    elif isinstance(exc, Http404):
        errors = [{"path": "", "message": "not found"}]
    elif isinstance(exc, DjangoPermissionDenied):
        errors = [{"path": "", "message": "you may not do this"}]
    else:
        errors = flatten_detail(getattr(exc, "detail", str(exc)))
    response.data = {"errors": errors}
    return response


@csrf_exempt
def json_not_found(request: HttpRequest, exception: Exception | None = None) -> JsonResponse:
    """The 404 of a URL that no API route matches, in the API's error shape (for every
    method: a POST without a CSRF token is still told that there is no such URL)."""
    return JsonResponse({"errors": [{"path": "", "message": "not found"}]}, status=404)


def read_json_body(request: Request) -> Any:
    """The request's JSON, parsed once with orjson; 413 over the limit, 415, 400 naming where."""
    content_type = request.content_type.split(";")[0].strip().lower()
    if content_type != "application/json" and not content_type.endswith("+json"):
        raise exceptions.UnsupportedMediaType(content_type or "(none)")
    body = request._request.body  # RequestDataTooBig over DATA_UPLOAD_MAX_MEMORY_SIZE: 413
    if len(body) > settings.KINDGI_MAX_REQUEST_BYTES:
        raise RequestDataTooBig()
    try:
        return parse_json(body)
    except JsonBodyError as error:
        raise ApiError([Issue("", f"the body is not valid JSON: {error}")]) from None


# ---------------------------------------------------------------------------- authentication


class ApiKeyAuthentication(BaseAuthentication):
    """`Authorization: Bearer <api key>`; a revoked or unknown key is 401.

    A view with a `key_rider()` (the SQL of a scalar subquery, or None) has its value read
    in the key's own statement, as `ridden(request)`: one round trip fewer on a path that
    reads the same thing on every request (`POST evaluate`: the enforced guardrails' stamp).
    """

    keyword = "bearer"

    def authenticate(self, request: Request) -> tuple[Any, ApiKey] | None:
        header = request.META.get("HTTP_AUTHORIZATION", "")
        scheme, _, secret = header.partition(" ")
        if scheme.lower() != self.keyword:
            return None
        secret = secret.strip()
        if not secret:
            raise exceptions.AuthenticationFailed("the Authorization header has no key")
        view: Any = (request.parser_context or {}).get("view")
        rider = view.key_rider() if hasattr(view, "key_rider") else None
        key, ridden = active_key_with(hash_key(secret), rider)
        if rider is not None:
            request._kindgi_ridden = ridden  # type: ignore[attr-defined]
        if key is None:
            raise exceptions.AuthenticationFailed("unknown or revoked API key")
        key.touch()
        replicas.follow_key(key.pk, request.method or "GET")
        request._request.kindgi_api_key = key  # type: ignore[attr-defined]  # the request's log line names its prefix (kindgi_console.logs)
        from django.contrib.auth.models import AnonymousUser

        return AnonymousUser(), key

    def authenticate_header(self, request: Request) -> str:
        return 'Bearer realm="kindgi"'


def ridden(request: Request) -> Any:
    """The value of the view's `key_rider`, read with the request's API key (None without one)."""
    return getattr(request, "_kindgi_ridden", None)


class ApiKeyAuthenticationScheme(OpenApiAuthenticationExtension):  # type: ignore[no-untyped-call]
    target_class = "kindgi_console.api.ApiKeyAuthentication"
    name = "apiKey"

    def get_security_definition(self, auto_schema: Any) -> dict[str, str]:
        return {"type": "http", "scheme": "bearer", "description": "An API key (create_api_key)."}


# ---------------------------------------------------------------------------- permissions


def caller_of(request: Request) -> Caller:
    """The request's caller, made once per request."""
    caller = getattr(request, "_kindgi_caller", None)
    if caller is None:
        caller = Caller.from_request(request._request, request.auth)
        if caller.key is None:
            caller.user = request.user
        request._kindgi_caller = caller  # type: ignore[attr-defined]
    return caller


class HasScope(BasePermission):
    """The view's `scopes[METHOD]`: a key needs that scope, a user the matching role."""

    def has_permission(self, request: Request, view: Any) -> bool:
        scope = view.scopes.get(request.method, view.scopes.get("*"))
        if scope is None:
            return True
        caller = caller_of(request)
        if not caller.is_authenticated:
            raise exceptions.NotAuthenticated()
        if not caller.can(scope):
            raise exceptions.PermissionDenied(f"this needs the {scope!r} scope or permission")
        return True


# ---------------------------------------------------------------------------- throttling


class CallerRateThrottle(TokenBucketThrottle):
    """Requests per caller (key or user, else address); the rate is KINDGI_API_RATE."""

    scope = "caller"

    def rate_for(self, request: Request) -> str | None:
        rate: str | None = settings.KINDGI_API_RATE
        return rate

    def get_cache_key(self, request: Request, view: Any) -> str:
        caller = caller_of(request)
        if caller.key is not None:
            ident = f"key:{caller.key.pk}"
        elif caller.is_authenticated:
            ident = f"user:{caller.user.pk}"
        else:
            ident = f"addr:{self.get_ident(request)}"
        return f"throttle:{ident}"

    def get_ident(self, request: Request) -> str:
        """The client's address, from `X-Forwarded-For` only behind a trusted proxy (DRF's own
        reads the header from anyone while `NUM_PROXIES` is unset)."""
        return client_address(request)


class RuntimeRateThrottle(CallerRateThrottle):
    """The runtime path's own limit (POST evaluate, ingestion): sized for a fleet that
    checks every agent turn with one key, and counted apart from the API's other requests.

    The rate is the key's own `runtime_rate` when set, else KINDGI_RUNTIME_RATE.
    """

    scope = "runtime"

    def rate_for(self, request: Request) -> str | None:
        key = caller_of(request).key
        own = getattr(key, "runtime_rate", "") if key is not None else ""
        rate: str | None = own or settings.KINDGI_RUNTIME_RATE
        return rate

    def get_cache_key(self, request: Request, view: Any) -> str:
        return "runtime-" + super().get_cache_key(request, view)


# ---------------------------------------------------------------------------- negotiation


class Negotiation(DefaultContentNegotiation):
    """DRF's, without parsing an `Accept` that every renderer satisfies: none, `*/*` or
    the first renderer's own media type (what runtimes send), with no `?format=`. The
    first renderer is what DRF would choose for them; any other header is DRF's to read."""

    def select_renderer(self, request: Request, renderers: Iterable[Any], format_suffix: str | None = None) -> Any:
        renderers = list(renderers)
        accept = request.META.get("HTTP_ACCEPT", "*/*")
        first = renderers[0]
        plain = format_suffix is None and self.settings.URL_FORMAT_OVERRIDE not in request.query_params
        if plain and accept in ("*/*", first.media_type):
            return first, first.media_type
        return super().select_renderer(request, renderers, format_suffix)


# ---------------------------------------------------------------------------- pagination


class KeysetPagination(BasePagination):
    """Cursor pagination on (time, id), newest first: page 1,000 costs what page 1 costs.

    The cursor is the position of the last row shown; `limit` sets the page size. The
    view names its time field in `ordering_field`.
    """

    cursor_query_param = "cursor"
    page_size_query_param = "limit"
    page_size = 50
    max_page_size = 500

    def paginate_queryset(  # type: ignore[override]  # it pages querysets only (keyset)
        self, queryset: QuerySet[Any], request: Request, view: Any = None
    ) -> list[Any]:
        self.request = request
        self.field = getattr(view, "ordering_field", "created_at")
        self.limit = self._page_size(request)
        self.cursor = self._decode(request.query_params.get(self.cursor_query_param))
        if self.cursor is not None:
            queryset = queryset.filter(paging.past(self.field, self.cursor))
        rows = list(queryset.order_by(f"-{self.field}", "-pk")[: self.limit + 1])
        self.has_next = len(rows) > self.limit
        self.page = rows[: self.limit]
        return self.page

    def _page_size(self, request: Request) -> int:
        raw = request.query_params.get(self.page_size_query_param)
        if raw is None:
            return self.page_size
        if not raw.isdigit() or not 1 <= int(raw) <= self.max_page_size:
            raise ApiError([Issue("/limit", f"limit is a number from 1 to {self.max_page_size}")])
        return int(raw)

    def _decode(self, raw: str | None) -> tuple[datetime, int] | None:
        if not raw:
            return None
        try:
            return paging.decode_time(raw)
        except paging.BadCursor:
            raise ApiError([Issue("/cursor", "this cursor is not one the API gave")]) from None

    def next_link(self) -> str | None:
        if not self.has_next:
            return None
        url = self.request.build_absolute_uri()
        return replace_query_param(url, self.cursor_query_param, paging.encode(self.page[-1], self.field))

    def get_paginated_response(self, data: Any) -> Response:
        return Response({"next": self.next_link(), "results": data})

    def get_paginated_response_schema(self, schema: dict[str, Any]) -> dict[str, Any]:
        return {
            "type": "object",
            "required": ["next", "results"],
            "properties": {"next": {"type": "string", "format": "uri", "nullable": True}, "results": schema},
        }

    def get_schema_operation_parameters(self, view: Any) -> list[dict[str, Any]]:
        return [
            {
                "name": self.cursor_query_param,
                "in": "query",
                "required": False,
                "description": "The `next` link's cursor.",
                "schema": {"type": "string"},
            },
            {
                "name": self.page_size_query_param,
                "in": "query",
                "required": False,
                "description": "Page size.",
                "schema": {"type": "integer", "minimum": 1, "maximum": self.max_page_size},
            },
        ]


# ---------------------------------------------------------------------------- the base view


class ConsoleAPIView(GenericAPIView):  # type: ignore[type-arg]
    """The base of every /api/v1/ view.

    `scopes` maps an HTTP method (or "*") to the capability it needs. `get_queryset`
    narrows tenant-owned models to the caller's tenants: the one place the API scopes.
    """

    authentication_classes = [ApiKeyAuthentication, SessionAuthentication]
    permission_classes = [HasScope]
    throttle_classes = [CallerRateThrottle]
    content_negotiation_class = Negotiation
    pagination_class: type[BasePagination] | None = KeysetPagination
    metadata_class = None  # OPTIONS is 405: the OpenAPI description documents the API
    scopes: dict[str, str] = {"*": "read"}
    ordering_field = "created_at"
    #: The methods whose requests run within KINDGI_REQUEST_TIME_LIMIT_S (kindgi_console/deadline.py).
    time_limited: Collection[str] = ()
    #: The methods of the runtime path (verdicts, ingestion): throttled by RuntimeRateThrottle.
    runtime_methods: Collection[str] = ()

    def get_throttles(self) -> list[Any]:
        if self.request.method in self.runtime_methods:
            return [RuntimeRateThrottle()]
        return list(super().get_throttles())

    def dispatch(self, request: HttpRequest, *args: Any, **kwargs: Any) -> Any:
        if request.method not in self.time_limited:
            return super().dispatch(request, *args, **kwargs)
        with deadline.within():
            return super().dispatch(request, *args, **kwargs)

    @property
    def caller(self) -> Caller:
        return caller_of(self.request)

    def get_queryset(self) -> QuerySet[Any]:
        queryset = super().get_queryset()
        if isinstance(queryset, TenantScopedQuerySet):
            return queryset.for_caller(self.caller)
        return queryset

    def get_exception_handler(self) -> Any:
        return exception_handler

    def initial(self, request: Request, *args: Any, **kwargs: Any) -> None:
        super().initial(request, *args, **kwargs)
        refuse_nul_characters(request, kwargs)


def object_body(body: object, fields: Collection[str], shape: str = "the body is an object") -> dict[str, Any]:
    """`body` if it is a JSON object of `fields` only; else a 400 saying `shape` or naming the first unknown field."""
    if not isinstance(body, dict):
        raise ApiError([Issue("", shape)])
    unknown = sorted(set(body) - set(fields))
    if unknown:
        raise ApiError([Issue(f"/{unknown[0]}", f"unknown field; use {', '.join(sorted(fields))}")])
    return body


def body_tenant(body: dict[str, Any]) -> str | None:
    """The tenant slug a request body names (or None); a 400 naming `/tenant` for anything else
    (a NUL among them: PostgreSQL could not even look it up)."""
    tenant = body.get("tenant")
    if tenant is not None and (not isinstance(tenant, str) or "\x00" in tenant):
        raise ApiError([Issue("/tenant", "tenant is a tenant's slug")])
    return tenant


def caller_authors(caller: Caller, tenant: str | None) -> bool:
    """Whether the caller authors the tenant (a key with the start scope counts as one)."""
    if caller.key is not None:
        return True
    try:
        caller.tenant_for_write(tenant, "author")
    except TenantDenied:
        return False
    return True


def limit_param(raw: str | None, default: int, most: int) -> int:
    """A `limit` query parameter: `default` when absent, else an integer from 1 to `most` (400 otherwise)."""
    if raw is None or raw == "":
        return default
    if not raw.isdigit() or not 1 <= int(raw) <= most:
        raise ApiError([Issue("/limit", f"limit is an integer from 1 to {most}")])
    return int(raw)


def refuse_nul_characters(request: Request, kwargs: dict[str, Any]) -> None:
    """NUL in a query or path parameter is a 400 naming it (PostgreSQL cannot store it)."""
    named = [*request.query_params.lists(), *((name, [value]) for name, value in kwargs.items())]
    for name, values in named:
        if any("\x00" in str(value) for value in values):
            raise ApiError([Issue(pointer(name), "the NUL character is not allowed")])
