"""The console's middleware: answers kept out of shared caches, and what only the pages need.

`ApiRequiresHttps` answers plain HTTP to /api/ with a JSON error where Django would redirect
it (SECURE_SSL_REDIRECT): a client that follows, or merely counts, a 301 as delivered (the
OpenTelemetry exporter does) would lose what it sent without a word.
`PrivateAnswers` marks every API answer and every page shown to a signed-in person as not
to be stored by any cache; `RefuseNulForPages` answers 400 for a NUL in a page's address
(the API refuses it in its base view, naming the parameter). The others are skipped for the
API's requests (/api/v1/).

A runtime calls the API before every agent turn; these add nothing to its answers:
static files (WhiteNoise serves /static/ only) and flashed messages (no API view reads or
writes them). Each is a subclass of the original, so the system checks still find it.
Sessions, authentication and the CSRF middleware stay (a signed-in user may call the API
from the console; `check --deploy` wants Django's own CSRF middleware), and so do the
response headers (HSTS, CSP, X-Frame-Options); `ContentSecurityPolicy` builds the API's CSP
header once rather than for every answer.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import csp.middleware
from csp.constants import HEADER, HEADER_REPORT_ONLY
from csp.utils import build_policy
from django.conf import settings
from django.contrib.messages.middleware import MessageMiddleware
from django.core.signals import setting_changed
from django.dispatch import receiver
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.utils.cache import add_never_cache_headers, patch_vary_headers
from whitenoise.middleware import WhiteNoiseMiddleware

API_V1 = "/api/v1/"
API = "/api/"
HTTPS_REQUIRED = (
    "HTTPS is required: this console redirects plain HTTP, and the API never redirects (a client could take "
    "the redirect for success). Call it over https://; behind a proxy that ends TLS, the proxy must send "
    "X-Forwarded-Proto: https"
)
NUL = "\x00"


def is_api_v1(request: HttpRequest) -> bool:
    return request.path_info.startswith(API_V1)


class ApiRequiresHttps:
    """Plain HTTP to /api/ is a 403 in the API's error shape when pages are redirected to
    HTTPS; runs before SecurityMiddleware, which would answer 301. Pages still redirect."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if settings.SECURE_SSL_REDIRECT and request.path_info.startswith(API) and not request.is_secure():
            return JsonResponse({"errors": [{"path": "", "message": HTTPS_REQUIRED}]}, status=403)
        return self.get_response(request)


class StaticFilesForPages(WhiteNoiseMiddleware):  # type: ignore[misc]  # WhiteNoise ships no types
    def __call__(self, request: HttpRequest) -> HttpResponse:
        if is_api_v1(request):
            response: HttpResponse = self.get_response(request)
            return response
        return super().__call__(request)  # type: ignore[no-any-return]


class MessagesForPages(MessageMiddleware):
    def process_request(self, request: HttpRequest) -> None:
        if not is_api_v1(request):
            super().process_request(request)

    def process_response(self, request: HttpRequest, response: HttpResponse) -> HttpResponse:
        if is_api_v1(request):
            return response
        return super().process_response(request, response)


class PrivateAnswers:
    """`Cache-Control: no-store` (Django's `never_cache` headers) wherever a person's data is
    answered: every API answer and every page of a signed-in person, so that neither a shared
    proxy nor the browser's back button gives them to someone else. An API answer also varies
    on the cookie: a session chose it as much as a key would."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if is_api_v1(request):
            add_never_cache_headers(response)
            patch_vary_headers(response, ("Cookie",))
        elif getattr(request, "user", None) is not None and request.user.is_authenticated:
            add_never_cache_headers(response)
        return response


class RefuseNulForPages:
    """A NUL in a page's path or query is a 400 naming where: PostgreSQL cannot hold the
    character, so a view that looked it up would fail with a 500 (a guardrail id, a search).

    Checked once the URL is resolved, before any view, for every page alike; the API's
    own base view does the same for its parameters, in the API's error shape."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_view(
        self, request: HttpRequest, view: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> HttpResponse | None:
        if request.path_info.startswith("/api/"):
            return None
        where = nul_in(request, [*args, *kwargs.values()])
        if where is None:
            return None
        if request.path_info.endswith(".json"):  # what the pages' scripts fetch: the API's shape
            issue = {"path": f"/{where}" if where else "", "message": "the NUL character is not allowed"}
            return JsonResponse({"errors": [issue]}, status=400)
        named = f"The query parameter {where!r}" if where else "The address"
        return render(request, "bad_address.html", {"reason": f"{named} holds the NUL character"}, status=400)


def nul_in(request: HttpRequest, path_values: list[Any]) -> str | None:
    """Where the request's address holds a NUL: "" for its path, else the query parameter's
    name; None when it holds none."""
    if NUL in request.path_info or any(NUL in str(value) for value in path_values):
        return ""
    for name, values in request.GET.lists():
        if NUL in name or any(NUL in value for value in values):
            return name.replace(NUL, "").replace("~", "~0").replace("/", "~1")
    return None


#: What a view sets on its response to change django-csp's policy for it.
CSP_OVERRIDES = (
    "_csp_exempt",
    "_csp_exempt_ro",
    "_csp_config",
    "_csp_update",
    "_csp_replace",
    "_csp_config_ro",
    "_csp_update_ro",
    "_csp_replace_ro",
)


class ContentSecurityPolicy(csp.middleware.CSPMiddleware):
    """django-csp's, with the header of the API's answers built once: they use no nonce and
    no view of the API changes the policy, so it is the settings' (built again when they
    change). A page's header is built for each answer, as django-csp does."""

    def process_response(self, request: HttpRequest, response: HttpResponse) -> HttpResponse:  # type: ignore[override]
        if not is_api_v1(request) or getattr(request, "_csp_nonce", None) is not None:
            return super().process_response(request, response)  # type: ignore[return-value]
        if any(hasattr(response, name) for name in CSP_OVERRIDES):
            return super().process_response(request, response)  # type: ignore[return-value]
        for header, value, excluded in api_policy():
            if value and header not in response and not request.path_info.startswith(excluded):
                response[header] = value
        return response


@functools.cache
def api_policy() -> tuple[tuple[str, str, tuple[str, ...]], ...]:
    """(header, policy, excluded URL prefixes) of the enforced and the report-only policies."""
    return tuple(
        (header, build_policy(report_only=report_only), _excluded(setting))
        for header, setting, report_only in (
            (HEADER, "CONTENT_SECURITY_POLICY", False),
            (HEADER_REPORT_ONLY, "CONTENT_SECURITY_POLICY_REPORT_ONLY", True),
        )
    )


def _excluded(setting: str) -> tuple[str, ...]:
    policy = getattr(settings, setting, None) or {}
    return tuple(policy.get("EXCLUDE_URL_PREFIXES", None) or ())


@receiver(setting_changed)
def _policy_changed(setting: str, **kwargs: Any) -> None:
    if setting.startswith("CONTENT_SECURITY_POLICY"):
        api_policy.cache_clear()
