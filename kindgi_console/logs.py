"""What each request and each task leaves behind: its metrics, its request id and, with
`KINDGI_LOG_FORMAT=json`, one JSON line in the log.

`ObserveRequests` (the first middleware) times every request, counts it in the metrics
(`kindgi_console.instruments`) under its route class, gives it a request id (the client's
`X-Request-ID` when it is a short token, else a new one; answered in the same header) and,
in JSON, logs one line for it on the `kindgi.access` logger: request id, method, route,
status, duration, tenant and key prefix. The probes (`/healthz`, `/readyz`, `/metrics`)
are counted but logged at DEBUG only: a supervisor polling them every few seconds would
otherwise fill the log (`kindgi_console.log_format.JsonLines` formats each record as one
JSON object a line). `task_ended` (connected to Celery's task signals in
`traces/store/processes.py`) writes one line per task: its id, name, state and duration,
and the id and tenant of the request that sent it (message headers added as it is
published, `mark_sent_task`).
"""

from __future__ import annotations

import contextvars
import logging
import re
import time
import uuid
from collections.abc import Callable, MutableMapping
from typing import Any

from django.conf import settings
from django.http import HttpRequest, HttpResponse

from kindgi_console import instruments
from kindgi_console.log_format import FIELDS
from kindgi_console.tenancy.scoping import SESSION_TENANT

access = logging.getLogger("kindgi.access")
tasks = logging.getLogger("kindgi.task")

#: The methods counted under their own name; any other is `other` (labels stay bounded).
METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
#: Routes a supervisor or Prometheus polls: logged at DEBUG only.
PROBES = frozenset({"healthz", "readyz", "healthz-workers", "metrics"})
#: A request id the client may choose: a short token, nothing that could forge a log line.
REQUEST_ID = re.compile(r"^[A-Za-z0-9._:-]{1,64}$")
#: The message headers that carry the sending request's id and tenant to a task's line.
REQUEST_HEADER, TENANT_HEADER = "kindgi_request_id", "kindgi_tenant"
#: The request this thread is answering: the tasks it sends carry its id and tenant.
answering: contextvars.ContextVar[HttpRequest | None] = contextvars.ContextVar("answering", default=None)


def json_logs() -> bool:
    return bool(settings.KINDGI_LOG_FORMAT == "json")


def route_of(request: HttpRequest) -> str:
    """The request's route class: its URL pattern's name (`api-evaluate`, `trace-detail`),
    `static` for a static file, `unmatched` for an address no route has."""
    probe = request.META.get("KINDGI_ROUTE")
    if probe is not None:
        return str(probe)
    match = getattr(request, "resolver_match", None)
    if match is not None:
        return match.view_name or match.route or "unnamed"
    return "static" if request.path_info.startswith(settings.STATIC_URL) else "unmatched"


def request_id_of(request: HttpRequest) -> str:
    given = request.headers.get("X-Request-ID", "")
    return given if REQUEST_ID.match(given) else uuid.uuid4().hex


class ObserveRequests:
    """Times, counts and (in JSON) logs every request; answers its request id."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        started = time.perf_counter()
        request_id = request_id_of(request)
        request.META["KINDGI_REQUEST_ID"] = request_id
        token = answering.set(request)
        try:
            response = self.get_response(request)
        finally:
            answering.reset(token)
        seconds = time.perf_counter() - started
        route = route_of(request)
        method = request.method if request.method in METHODS else "other"
        instruments.REQUESTS.labels(route, method, f"{response.status_code // 100}xx").inc()
        instruments.REQUEST_SECONDS.labels(route, method).observe(seconds)
        response["X-Request-ID"] = request_id
        if json_logs():
            level = logging.DEBUG if route in PROBES else logging.INFO
            access.log(
                level,
                "%s %s %s",
                method,
                route,
                response.status_code,
                extra={FIELDS: fields_of(request, response, seconds, route)},
            )
        return response


def tenant_of(request: HttpRequest) -> str | None:
    """The tenant a request acts for: its key's, else the signed-in person's current one."""
    key = getattr(request, "kindgi_api_key", None)
    if key is not None and key.tenant_id is not None:
        return str(key.tenant.slug if type(key).tenant.is_cached(key) else key.tenant_id)
    session = getattr(request, "session", None)
    return None if session is None else session.get(SESSION_TENANT)


def fields_of(request: HttpRequest, response: HttpResponse, seconds: float, route: str) -> dict[str, Any]:
    """A request's line: its id, what was asked, how it was answered, and by whom."""
    key = getattr(request, "kindgi_api_key", None)
    tenant = tenant_of(request)
    user = getattr(request, "user", None)
    return {
        "request_id": request.META["KINDGI_REQUEST_ID"],
        "method": request.method,
        "path": request.path_info,
        "route": route,
        "status": response.status_code,
        "duration_ms": round(seconds * 1000, 3),
        "tenant": tenant,
        "key_prefix": key.prefix if key is not None else None,
        "user": user.get_username() if user is not None and user.is_authenticated else None,
    }


def mark_sent_task(headers: MutableMapping[str, Any]) -> None:
    """A task sent while answering a request carries the request's id and tenant."""
    request = answering.get()
    if request is not None:
        headers[REQUEST_HEADER] = request.META.get("KINDGI_REQUEST_ID")
        headers[TENANT_HEADER] = tenant_of(request)


_task_started: dict[str, float] = {}


def task_started(task_id: str) -> None:
    _task_started[task_id] = time.perf_counter()


def task_ended(task_id: str, name: str, state: str, sent_by: Any = None) -> None:
    """A task's line (in JSON): its id, name, final state and duration, and the id and tenant
    of the request that sent it (`sent_by`: the task's request, which carries its headers)."""
    started = _task_started.pop(task_id, None)
    if not json_logs():
        return
    duration_ms = None if started is None else round((time.perf_counter() - started) * 1000, 3)
    line = {
        "task_id": task_id,
        "task": name,
        "state": state,
        "duration_ms": duration_ms,
        "request_id": getattr(sent_by, REQUEST_HEADER, None),
        "tenant": getattr(sent_by, TENANT_HEADER, None),
    }
    tasks.info("%s %s", name, state, extra={FIELDS: line})
