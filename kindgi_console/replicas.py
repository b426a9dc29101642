"""Read replicas: the pages' and the read API's queries on a PostgreSQL streaming replica,
everything else on the primary.

`DATABASE_REPLICA_URLS` names the replicas (aliases `replica1`, `replica2`...). A request
reads from one of them when all of these hold:

- it is a GET or HEAD (a write's own reads, and what it reads back, stay on the primary);
- whoever makes it has not written in the last `DATABASE_REPLICA_PIN_S` seconds (a signed
  cookie for a person, the cache for an API key): read-your-writes;
- it has not written earlier in the same request, and is in no transaction;
- the model is not one the primary must answer (sessions, the cache table, the migration
  records), and the replica is reachable and at most `DATABASE_REPLICA_MAX_LAG_S` behind.

Background work (Celery tasks, commands) always uses the primary: nothing marks them. The lag
of each replica is measured at most every few seconds per process and shown by `/readyz`
and the `kindgi_replica_lag_seconds` metric.
"""

from __future__ import annotations

import logging
import random
import sys
import threading
import time
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.core.exceptions import MiddlewareNotUsed
from django.core.signals import got_request_exception
from django.db import DEFAULT_DB_ALIAS, InterfaceError, OperationalError, connections
from django.http import HttpRequest, HttpResponse

logger = logging.getLogger(__name__)

#: The cookie that keeps a person who just wrote on the primary (signed: its value is the
#: time the pin ends).
PIN_COOKIE = "kindgi_primary"
_PIN_SALT = "kindgi.replicas.pin"
#: Models whose rows the primary answers, whatever the request.
PRIMARY_APPS = frozenset({"sessions", "django_cache", "migrations", "contenttypes"})
#: How often a process measures each replica's lag (seconds).
LAG_CHECK_S = 5.0
SAFE_METHODS = frozenset({"GET", "HEAD"})


@dataclass(slots=True)
class _Reads:
    """This request's choice: the replica its reads go to, None for the primary; whether a
    read went there, and whether the replica failed it."""

    replica: str | None
    used: str | None = None
    failed: bool = False


_reads: ContextVar[_Reads | None] = ContextVar("kindgi_replica_reads", default=None)


class ReplicaRouter:
    """Reads on the request's replica, writes on the primary; only the primary migrates."""

    def db_for_read(self, model: Any, **hints: Any) -> str:
        reads = _reads.get()
        if reads is None or reads.replica is None or model._meta.app_label in PRIMARY_APPS:
            return DEFAULT_DB_ALIAS
        if connections[DEFAULT_DB_ALIAS].in_atomic_block:
            return DEFAULT_DB_ALIAS  # what a transaction reads, it reads where it writes
        reads.used = reads.replica
        return reads.replica

    def db_for_write(self, model: Any, **hints: Any) -> str:
        reads = _reads.get()
        if reads is not None and model._meta.app_label not in PRIMARY_APPS:
            reads.replica = None  # the rest of the request reads what it wrote (a session or cache write is not data)
        return DEFAULT_DB_ALIAS

    def allow_relation(self, first: Any, second: Any, **hints: Any) -> bool:
        return True  # the replicas hold the primary's rows

    def allow_migrate(self, db: str, app_label: str, **hints: Any) -> bool:
        return db == DEFAULT_DB_ALIAS


class ReplicaReads:
    """Chooses, per request, whether its reads go to a replica; pins whoever writes."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        if not settings.REPLICA_ALIASES:
            raise MiddlewareNotUsed
        self.get_response = get_response
        got_request_exception.connect(_note_failure, dispatch_uid="kindgi-replica-failure")

    def __call__(self, request: HttpRequest) -> HttpResponse:
        safe = request.method in SAFE_METHODS
        replica = healthy_replica() if safe and not _pinned_by_cookie(request) else None
        reads = _Reads(replica)
        token = _reads.set(reads)
        try:
            response = self.get_response(request)
        finally:
            _reads.reset(token)
        if reads.failed and reads.used is not None:
            # The replica stopped answering since it was last measured: a GET is safe to
            # answer again, from the primary, and the replica serves nothing until it answers.
            measure(reads.used)
            logger.warning("read replica %s failed a read; answering from the primary", reads.used)
            token = _reads.set(_Reads(None))
            try:
                response = self.get_response(request)
            finally:
                _reads.reset(token)
        if not safe and settings.DATABASE_REPLICA_PIN_S:
            until = time.time() + settings.DATABASE_REPLICA_PIN_S
            response.set_signed_cookie(
                PIN_COOKIE,
                f"{until:.0f}",
                salt=_PIN_SALT,
                max_age=settings.DATABASE_REPLICA_PIN_S,
                secure=settings.SESSION_COOKIE_SECURE,
                httponly=True,
                samesite="Lax",
            )
        return response


def _note_failure(sender: Any, **kwargs: Any) -> None:
    """A request's exception: a database error after a read on the replica is its failure."""
    reads = _reads.get()
    error = sys.exc_info()[1]
    if reads is not None and reads.used is not None and isinstance(error, (OperationalError, InterfaceError)):
        reads.failed = True


def _pinned_by_cookie(request: HttpRequest) -> bool:
    value = request.get_signed_cookie(PIN_COOKIE, default=None, salt=_PIN_SALT)
    try:
        return value is not None and float(value) > time.time()
    except ValueError:
        return False


# --- API keys: read-your-writes through the cache ------------------------------------------------

_key_pins: dict[int, float] = {}  # key -> when this process last recorded its pin
_key_pins_lock = threading.Lock()


def follow_key(key_id: int, method: str) -> None:
    """An API key's request: one that writes pins the key to the primary (in the cache, for
    every process); one that reads, from a pinned key, reads the primary. No-op without
    replicas."""
    if not settings.REPLICA_ALIASES or not settings.DATABASE_REPLICA_PIN_S:
        return
    from django.core.cache import cache

    name = f"kindgi:replica-pin:key:{key_id}"
    if method not in SAFE_METHODS:
        now = time.monotonic()
        with _key_pins_lock:
            recorded = _key_pins.get(key_id)
            fresh = recorded is not None and now - recorded < settings.DATABASE_REPLICA_PIN_S / 2
            if not fresh:
                if len(_key_pins) > 10_000:
                    _key_pins.clear()
                _key_pins[key_id] = now
        if not fresh:  # (a pin recorded under half its life ago still covers this write)
            cache.set(name, 1, settings.DATABASE_REPLICA_PIN_S)
        return
    reads = _reads.get()
    if reads is not None and reads.replica is not None and cache.get(name):
        reads.replica = None


# --- health and lag -----------------------------------------------------------------------------


@dataclass(slots=True)
class ReplicaState:
    alias: str
    lag_s: float | None  # None: unreachable
    checked: float
    error: str = ""

    @property
    def usable(self) -> bool:
        return self.lag_s is not None and self.lag_s <= settings.DATABASE_REPLICA_MAX_LAG_S


_states: dict[str, ReplicaState] = {}
_states_lock = threading.Lock()

# The replica's lag: none while it has replayed all it received; else the age of the last
# transaction it replayed (0 on a primary, which is not in recovery).
LAG_SQL = (
    "SELECT CASE WHEN NOT pg_is_in_recovery() THEN 0 "
    "WHEN pg_last_wal_receive_lsn() = pg_last_wal_replay_lsn() AND NOT pg_is_wal_replay_paused() THEN 0 "
    "ELSE COALESCE(EXTRACT(EPOCH FROM now() - pg_last_xact_replay_timestamp()), 0) END"
)


def measure(alias: str) -> ReplicaState:
    """The replica's lag now (a query on it), or unreachable with the reason."""
    connection = connections[alias]
    try:
        with connection.cursor() as cursor:
            cursor.execute(LAG_SQL)
            (lag,) = cursor.fetchone()
        state = ReplicaState(alias, max(0.0, float(lag)), time.monotonic())
    except Exception as exc:  # any failure: the replica serves nothing until it answers again
        connection.close()
        state = ReplicaState(alias, None, time.monotonic(), error=f"{type(exc).__name__}: {exc}".strip()[:300])
    with _states_lock:
        _states[alias] = state
    return state


def states(max_age_s: float = LAG_CHECK_S) -> list[ReplicaState]:
    """Each replica's state, measured again when older than `max_age_s`."""
    found = []
    for alias in settings.REPLICA_ALIASES:
        with _states_lock:
            state = _states.get(alias)
        if state is None or time.monotonic() - state.checked >= max_age_s:
            state = measure(alias)
        found.append(state)
    return found


def healthy_replica() -> str | None:
    """A replica that is reachable and close enough behind, at random; None: the primary."""
    usable = [state.alias for state in states() if state.usable]
    return random.choice(usable) if usable else None  # spreading reads, not a secret


def reading_from() -> str:
    """The alias this request's reads go to now (the primary outside requests)."""
    reads = _reads.get()
    return reads.replica if reads is not None and reads.replica is not None else DEFAULT_DB_ALIAS


def forget_states() -> None:
    """Measure every replica again on next use (tests, after a replica stops or starts)."""
    with _states_lock:
        _states.clear()
