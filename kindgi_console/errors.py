"""Every /api/ error in the API's shape, whatever raised it.

DRF shapes the errors it knows (`kindgi_console.api.exception_handler`); anything else
(a bug, a lost database connection, an error in a middleware) would otherwise be Django's
HTML "Server Error (500)". A lost database is a 503 with `Retry-After`: the request may
succeed once the database is back, and clients that retry should.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable

from django.db import InterfaceError, OperationalError
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views import defaults

log = logging.getLogger("kindgi_console.errors")

API_PREFIX = "/api/"
#: Seconds a client waits before retrying a request that met an unavailable database.
RETRY_AFTER_SECONDS = 5


def is_api(request: HttpRequest) -> bool:
    return request.path.startswith(API_PREFIX)


def error_response(exc: BaseException | None) -> JsonResponse:
    """The API's error shape for an unexpected exception: 503 for the database, else 500."""
    if isinstance(exc, OperationalError | InterfaceError):
        response = JsonResponse(
            {"errors": [{"path": "", "message": "the database is unavailable; retry later"}]}, status=503
        )
        response["Retry-After"] = str(RETRY_AFTER_SECONDS)
        return response
    return JsonResponse({"errors": [{"path": "", "message": "internal error"}]}, status=500)


class ApiErrorsMiddleware:
    """Shapes the /api/ errors that DRF did not: exceptions of views, and any other 5xx."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if is_api(request) and response.status_code >= 500 and not _is_shaped(response):
            return error_response(None)
        return response

    def process_exception(self, request: HttpRequest, exc: Exception) -> HttpResponse | None:
        if not is_api(request):
            return None
        log.exception("%s %s failed", request.method, request.path, exc_info=exc)
        return error_response(exc)


#: The bodies of errors a view shaped itself: the API's JSON, and OTLP's protobuf Status.
SHAPED = ("application/json", "application/x-protobuf")


def _is_shaped(response: HttpResponse) -> bool:
    return str(response.get("Content-Type", "")).startswith(SHAPED)


def bad_request(request: HttpRequest, exception: Exception) -> HttpResponse:
    """handler400 (a request Django refuses before any view, e.g. an empty Host header):
    the API's shape under /api/, Django's page elsewhere."""
    if is_api(request):
        return JsonResponse({"errors": [{"path": "", "message": "bad request"}]}, status=400)
    return defaults.bad_request(request, exception)


def server_error(request: HttpRequest) -> HttpResponse:
    """handler500: the API's shape under /api/, Django's page elsewhere."""
    if is_api(request):
        return error_response(sys.exc_info()[1])
    return defaults.server_error(request)
