"""How domain code sends background work, and what every task of the console shares.

Domain modules never import a `tasks` module (an import-linter contract holds it): they send
a task by its registered name through `send`, and the task modules, which import the domain
modules, are found by Celery's autodiscovery. The names are the registered names of the
tasks (`traces.tasks.evaluate_chunk`, `alerts.tasks.deliver`), kept when a task's module
moved, so that messages already queued still route (`CELERY_TASK_ROUTES`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from celery import current_app
from django.db import InterfaceError, OperationalError
from kombu.exceptions import OperationalError as BrokerError

#: Faults that go away by themselves: a database restarting or locked, a broker unreachable.
TRANSIENT = (OperationalError, InterfaceError, BrokerError)

#: The options of the tasks that keep their state in rows: acknowledged after they ran (a
#: message whose worker was lost is delivered again), transient faults retried with backoff.
TASK_OPTIONS: dict[str, Any] = {
    "acks_late": True,
    "reject_on_worker_lost": True,
    "autoretry_for": TRANSIENT,
    "retry_backoff": 2,
    "retry_backoff_max": 120,
    "retry_jitter": True,
    "max_retries": 8,
}


def send(name: str, *args: Any, **options: Any) -> None:
    """Send the registered task `name` with `args`; `options` are `apply_async`'s (`kwargs`,
    `countdown`, `retry`). Raises KeyError for a name no task module registers."""
    app = current_app
    if name not in app.tasks:
        # A web process has not imported the tasks modules: Celery's autodiscovery imports
        # them when the worker starts, or when asked (once: then they are registered).
        app.loader.import_default_modules()
    app.tasks[name].apply_async(args, **options)


def reason_of(exc: BaseException) -> str:
    """The exception as a run or an upload shows it: its type and the first line of its
    message (a database error's next lines quote the SQL)."""
    lines = str(exc).splitlines()
    return f"{type(exc).__name__}: {lines[0] if lines else ''}"


@contextmanager
def failing_for_good(fail: Callable[[str], None], what: str) -> Iterator[None]:
    """A fault that is not transient calls `fail` with the reason, at once (a transient one is
    retried; when its retries run out, the task's on_failure fails the work)."""
    try:
        yield
    except TRANSIENT:
        raise
    except Exception as exc:
        fail(f"{what}: {reason_of(exc)}")
        raise
