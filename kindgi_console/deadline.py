"""A request's deadline, which the request checks itself.

gunicorn's `--timeout` restarts a worker that stops answering its heartbeat; a `gthread`
worker's thread that is busy with one request keeps the heartbeat going, so nothing stops a
request that runs for minutes. The requests that take traces (`POST /api/v1/traces`,
`POST /api/v1/evaluate`, the OTLP export) therefore run `within` KINDGI_REQUEST_TIME_LIMIT_S
and `check` it between pieces of their work (each span walked, each trace prepared), and
their transactions are `atomic` blocks whose statements PostgreSQL stops at the deadline too
(`statement_timeout`, a wait for a lock included). Past it the request raises
`DeadlineExceeded`: its transaction rolls back, so nothing is half-written, and the API
answers 503 with the API's error body naming the limit (OTLP: a `google.rpc.Status`).

Outside `within` (a Celery task, a management command) `check` does nothing.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from django.conf import settings
from django.db import OperationalError, connection, transaction
from psycopg.errors import QueryCanceled
from rest_framework import status
from rest_framework.exceptions import APIException

#: The time.monotonic() instant the current request must be done by, and its limit in seconds.
_deadline: ContextVar[tuple[float, float] | None] = ContextVar("kindgi_deadline", default=None)
#: Whether the current transaction's statements are bounded already (an outer `atomic`).
_bounded: ContextVar[bool] = ContextVar("kindgi_deadline_bounded", default=False)
#: Seconds a client is asked to wait before sending the request again.
RETRY_AFTER_S = 5
#: The clock deadlines are read on (a test may set another).
_clock = time.monotonic


class DeadlineExceeded(APIException):
    """The request ran past its deadline: it stopped and stored nothing. 503, Retry-After."""

    status_code = status.HTTP_503_SERVICE_UNAVAILABLE

    def __init__(self, limit_s: float, doing: str) -> None:
        super().__init__(
            f"the request ran past its limit of {limit_s:g} s (KINDGI_REQUEST_TIME_LIMIT_S) while {doing} "
            "and stopped: nothing was stored; send fewer traces or spans at once, or retry later"
        )
        self.limit_s = limit_s
        self.doing = doing


@contextmanager
def within(seconds: float | None = None) -> Iterator[float]:
    """Run the block with a deadline `seconds` from now (KINDGI_REQUEST_TIME_LIMIT_S by
    default); yields the deadline as a time.monotonic() instant."""
    limit = float(settings.KINDGI_REQUEST_TIME_LIMIT_S if seconds is None else seconds)
    instant = _clock() + limit
    token = _deadline.set((instant, limit))
    try:
        yield instant
    finally:
        _deadline.reset(token)


def instant() -> float | None:
    """The current deadline (a time.monotonic() instant), None outside `within`."""
    current = _deadline.get()
    return current[0] if current is not None else None


def check(doing: str) -> None:
    """Raise DeadlineExceeded when the current deadline has passed; `doing` names the work
    (in the message: "while walking the spans")."""
    current = _deadline.get()
    if current is not None and _clock() >= current[0]:
        raise DeadlineExceeded(current[1], doing)


@contextmanager
def atomic(doing: str) -> Iterator[None]:
    """`transaction.atomic()` whose statements end at the deadline, when there is one.

    On PostgreSQL the transaction's `statement_timeout` is what is left of the deadline
    (SET LOCAL: it ends with the transaction; within an outer transaction it is put back
    after the block), so a statement, or a wait for a lock another request holds, cannot
    outlast it; a statement cancelled so is DeadlineExceeded, and the block rolls back.
    """
    current = _deadline.get()
    if current is None or _bounded.get():
        with transaction.atomic():
            yield
        return
    check(doing)
    token = _bounded.set(True)
    outer = connection.in_atomic_block
    try:
        with transaction.atomic():
            previous = _bound_statements(current[0], outer)
            yield
            if previous is not None:
                _set_statement_timeout(previous)
    except OperationalError as error:
        if isinstance(error.__cause__, QueryCanceled):
            raise DeadlineExceeded(current[1], doing) from error
        raise
    finally:
        _bounded.reset(token)


def _bound_statements(until: float, outer: bool) -> str | None:
    """Set the transaction's statement_timeout to what is left until `until`; returns the
    value to put back after the block when it is inside an `outer` transaction."""
    if connection.vendor != "postgresql":
        return None
    left_ms = max(1, int((until - _clock()) * 1000))
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT current_setting('statement_timeout'), set_config('statement_timeout', %s, true)", [str(left_ms)]
        )
        row = cursor.fetchone()
    return str(row[0]) if outer and row is not None else None


def _set_statement_timeout(value: str) -> None:
    with connection.cursor() as cursor:
        cursor.execute("SELECT set_config('statement_timeout', %s, true)", [value])
