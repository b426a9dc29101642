"""What each request and each task leaves behind: its metrics, its request id and, with
`KINDGI_LOG_FORMAT=json`, one JSON line in the log.

`ObserveRequests` (the first middleware) times every request, counts it in the metrics
(`kindgi_console.instruments`) under its route class, gives it a request id (the client's
`X-Request-ID` when it is a short token, else a new one; answered in the same header) and,
in JSON, logs one line for it on the `kindgi.access` logger: request id, method, route,
status, duration, tenant and key prefix. The probes (`/healthz`, `/readyz`, `/metrics`)
are counted but logged at DEBUG only: a supervisor polling them every few seconds would
otherwise fill the log. `JsonLines` formats every log record of the process as one JSON
object a line; `log_task` (connected to Celery's task signals in `traces/store/tasks.py`)
writes one line per task: its id, name, state and duration.
"""

from __future__ import annotations

import json
import logging
import re
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from django.conf import settings
from django.http import HttpRequest, HttpResponse

from kindgi_console import instruments

access = logging.getLogger("kindgi.access")
tasks = logging.getLogger("kindgi.task")

#: The methods counted under their own name; any other is `other` (labels stay bounded).
METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
#: Routes a supervisor or Prometheus polls: logged at DEBUG only.
PROBES = frozenset({"healthz", "readyz", "healthz-workers", "metrics"})
#: A request id the client may choose: a short token, nothing that could forge a log line.
REQUEST_ID = re.compile(r"^[A-Za-z0-9._:-]{1,64}$")
#: What a record carries beyond the message, in its `kindgi` extra, as JSON fields.
FIELDS = "kindgi"


def json_logs() -> bool:
    return bool(settings.KINDGI_LOG_FORMAT == "json")


class JsonLines(logging.Formatter):
    """One JSON object per record: time, level, logger, message, the record's `kindgi`
    fields, and the exception's traceback when there is one."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        line.update(getattr(record, FIELDS, None) or {})
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        return json.dumps(line, default=str)


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
        response = self.get_response(request)
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


def fields_of(request: HttpRequest, response: HttpResponse, seconds: float, route: str) -> dict[str, Any]:
    """A request's line: its id, what was asked, how it was answered, and by whom."""
    key = getattr(request, "kindgi_api_key", None)
    tenant: str | None = None
    if key is not None and key.tenant_id is not None:
        tenant = key.tenant.slug if type(key).tenant.is_cached(key) else str(key.tenant_id)
    elif hasattr(request, "session"):
        tenant = request.session.get("tenant")
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


_task_started: dict[str, float] = {}


def task_started(task_id: str) -> None:
    _task_started[task_id] = time.perf_counter()


def task_ended(task_id: str, name: str, state: str) -> None:
    """A task's line (in JSON): its id, name, final state and duration."""
    started = _task_started.pop(task_id, None)
    if not json_logs():
        return
    duration_ms = None if started is None else round((time.perf_counter() - started) * 1000, 3)
    line = {"task_id": task_id, "task": name, "state": state, "duration_ms": duration_ms}
    tasks.info("%s %s", name, state, extra={FIELDS: line})
