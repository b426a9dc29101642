"""What an operator's supervisor and Prometheus call: health, readiness, the workers'
liveness and the metrics.

- `/healthz`: the process answers (nothing else is touched: no database).
- `/readyz`: the database, the broker and the cache answer and every migration is applied;
  503 naming each part that failed. Anonymous and cheap: a load balancer polls it.
- `/healthz/workers`: every Celery worker's and beat's heartbeat row (`traces.store.heartbeat`)
  with its age; 503 when one missed three beats, or when no worker or no beat has a row
  (`?hostname=` checks one process only, for a supervisor that restarts that one).
- `/metrics`: Prometheus' text format, summed over this machine's processes
  (`kindgi_console.instruments`) with the gauges read at scrape time (`traces.store.gauges`).
  Operator-level: a console-wide key with the `metrics` scope, or a client in
  `KINDGI_METRICS_ALLOWED_NETWORKS`; anyone else gets 401 or 403.

They are answered by a middleware (`Probes`) before the others: a probe comes over plain
HTTP to the process's own address (a load balancer, a container's health check,
Prometheus), which the redirect to HTTPS and the host check would refuse, and it needs
no session, CSRF or messages.

The probes' answers are never stored by a cache, and their 503s are not logged by Django's
request logger (a probe every few seconds during an outage would flood it): the answer
says what failed.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from typing import Any

import redis
from django.conf import settings
from django.core.cache import cache
from django.db import DatabaseError, connection
from django.db.migrations.executor import MigrationExecutor
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.utils import timezone
from django.utils.cache import add_never_cache_headers
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest, multiprocess

from kindgi_console import replicas
from kindgi_console.proxies import client_address, networks, parse
from kindgi_console.tenancy.keys import active_key
from kindgi_console.tenancy.models import hash_key
from traces.models import WorkerHeartbeat
from traces.store import gauges, heartbeat

logger = logging.getLogger(__name__)

_migrated = False


class NotReady(RuntimeError):
    """A part that answers but is not ready; its message says why, and may be shown to anyone."""


def probe_answer(body: dict[str, Any], status: int) -> JsonResponse:
    response = JsonResponse(body, status=status)
    add_never_cache_headers(response)
    response._has_been_logged = True  # type: ignore[attr-defined]  # Django's request logger skips it
    return response


def healthz(request: HttpRequest) -> JsonResponse:
    return probe_answer({"status": "ok"}, 200)


def check_database() -> None:
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")


def check_migrations() -> None:
    """Every migration applied (checked until it is, then once per process: code that brings
    new migrations comes with a new process)."""
    global _migrated
    if _migrated:
        return
    executor = MigrationExecutor(connection)
    pending = executor.migration_plan(executor.loader.graph.leaf_nodes())
    if pending:
        raise NotReady(f"{len(pending)} migrations not applied (first {pending[0][0]}): run manage.py migrate")
    _migrated = True


def check_broker() -> None:
    broker = settings.CELERY_BROKER_URL
    if broker.startswith(("redis://", "rediss://")):
        client = redis.Redis.from_url(broker, socket_connect_timeout=1, socket_timeout=1)
        try:
            client.ping()
        finally:
            client.close()
        return
    folder = str(settings.CELERY_BROKER_TRANSPORT_OPTIONS["data_folder_in"])
    if not os.access(folder, os.W_OK):
        raise NotReady(f"the filesystem broker's folder {folder} cannot be written")


def check_cache() -> None:
    cache.set("readyz", "1", timeout=30)
    if cache.get("readyz") != "1":
        raise NotReady("the cache did not keep what was written")


CHECKS: dict[str, Callable[[], None]] = {
    "database": check_database,
    "migrations": check_migrations,
    "broker": check_broker,
    "cache": check_cache,
}


def why_not_ready(error: Exception) -> str:
    """What the anonymous answer says of a failed part: our own reason, or only the error's
    type (a driver's message names hosts and users, which are not for anyone to read)."""
    if isinstance(error, NotReady):
        return f"{type(error).__name__}: {error}"
    return type(error).__name__


def readyz(request: HttpRequest) -> JsonResponse:
    checks: dict[str, str] = {}
    for part, check in CHECKS.items():
        if part == "migrations" and checks.get("database") != "ok":
            checks[part] = "not checked: the database does not answer"
            continue
        try:
            check()
        except Exception as error:  # every fault of a part is that part's failure, named
            checks[part] = why_not_ready(error)
            logger.debug("readiness: %s failed", part, exc_info=True)
        else:
            checks[part] = "ok"
    failed = [part for part, state in checks.items() if state != "ok"]
    body: dict[str, Any] = {"status": "ok" if not failed else "unavailable", "failed": failed, "checks": checks}
    if settings.REPLICA_ALIASES:  # a replica down or behind is not a failure: the primary reads instead
        body["replicas"] = replica_answers()
    return probe_answer(body, 200 if not failed else 503)


def replica_answers() -> list[dict[str, Any]]:
    """Each read replica's lag, measured now, and whether it serves reads (only the error's
    type when it does not answer: a driver's message names hosts)."""
    found = []
    for state in replicas.states(max_age_s=0):
        answer: dict[str, Any] = {"alias": state.alias, "lagSeconds": state.lag_s, "servesReads": state.usable}
        if state.error:
            answer["error"] = state.error.split(":", 1)[0]
        found.append(answer)
    return found


def workers(request: HttpRequest) -> JsonResponse:
    """The heartbeat rows and their age; 503 when one is stale, or no worker or beat beats."""
    try:
        return heartbeats(request)
    except DatabaseError as error:
        return probe_answer({"status": "unavailable", "problems": [f"database: {type(error).__name__}"]}, 503)


def heartbeats(request: HttpRequest) -> JsonResponse:
    rows = WorkerHeartbeat.objects.order_by("hostname")
    wanted = request.GET.get("hostname")
    if wanted is not None and ("\x00" in wanted or len(wanted) > 255):
        issue = {"path": "/hostname", "message": "a worker's name: at most 255 characters, no NUL"}
        return probe_answer({"errors": [issue]}, 400)
    if wanted is not None:
        rows = rows.filter(hostname=wanted)
    now, quiet = timezone.now(), heartbeat.quiet_since()
    found = [
        {
            "hostname": row.hostname,
            "kind": "beat" if row.hostname.startswith(heartbeat.BEAT_PREFIX) else "worker",
            "pid": row.pid,
            "seen_at": row.seen_at.isoformat(),
            "age_s": round((now - row.seen_at).total_seconds(), 3),
            "alive": row.seen_at >= quiet,
        }
        for row in rows[:1000]
    ]
    problems = [f"{item['hostname']} missed three heartbeats" for item in found if not item["alive"]]
    if wanted is not None and not found:
        problems.append(f"no heartbeat from {wanted}")
    for kind in ("worker", "beat") if wanted is None else ():
        if not any(item["kind"] == kind for item in found):
            problems.append(f"no {kind} has a heartbeat")
    body = {"status": "ok" if not problems else "unavailable", "problems": problems, "processes": found}
    return probe_answer(body, 200 if not problems else 503)


def may_read_metrics(request: HttpRequest) -> int | None:
    """None when the caller may read the metrics, else the status to answer (401, 403)."""
    allowed = networks(tuple(settings.KINDGI_METRICS_ALLOWED_NETWORKS))
    client = parse(client_address(request))
    if client is not None and any(client.version == net.version and client in net for net in allowed):
        return None
    scheme, _, secret = request.headers.get("Authorization", "").partition(" ")
    if scheme.lower() == "bearer" and secret.strip():
        key = active_key(hash_key(secret.strip()))
        if key is None:
            return 401
        return None if key.tenant_id is None and "metrics" in key.scopes else 403
    return 401


MESSAGES = {
    401: "reading the metrics needs a console-wide API key with the metrics scope (Authorization: Bearer ...)",
    403: "the metrics are the operator's: they need a console-wide API key with the metrics scope, "
    "or a client address in KINDGI_METRICS_ALLOWED_NETWORKS",
}


def metrics(request: HttpRequest) -> HttpResponse:
    refused = may_read_metrics(request)
    if refused is not None:
        refusal = JsonResponse({"errors": [{"path": "", "message": MESSAGES[refused]}]}, status=refused)
        if refused == 401:
            refusal["WWW-Authenticate"] = 'Bearer realm="kindgi"'
        return refusal
    registry = CollectorRegistry()
    multiprocess.MultiProcessCollector(registry, path=str(settings.KINDGI_METRICS_DIR))  # type: ignore[no-untyped-call]
    registry.register(gauges.ConsoleGauges())
    response = HttpResponse(generate_latest(registry), content_type=CONTENT_TYPE_LATEST)
    add_never_cache_headers(response)
    return response


#: The probes' paths, their route class (in the metrics and the log) and their view.
PROBES: dict[str, tuple[str, Callable[[HttpRequest], HttpResponse]]] = {
    "/healthz": ("healthz", healthz),
    "/readyz": ("readyz", readyz),
    "/healthz/workers": ("healthz-workers", workers),
    "/metrics": ("metrics", metrics),
}


class Probes:
    """Answers the probes' paths (GET or HEAD), before any other middleware but the one
    that times and counts requests."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        probe = PROBES.get(request.path_info.rstrip("/") or "/")
        if probe is None:
            return self.get_response(request)
        route, view = probe
        request.META["KINDGI_ROUTE"] = route
        if request.method not in ("GET", "HEAD"):
            response = JsonResponse({"errors": [{"path": "", "message": "use GET"}]}, status=405)
            response["Allow"] = "GET, HEAD"
            return response
        return view(request)
