"""What the console's Celery processes do besides their tasks: beat's heartbeat row, one
log line per task (`kindgi_console.logs`), and the metrics files of a worker process that
ended (prometheus-client's multi-process mode keeps its counts, drops its live values).

Connected to Celery's signals when the app is ready (`traces/apps.py`), in every process.
"""

from __future__ import annotations

import os
import socket
from typing import Any

from celery.signals import beat_init, before_task_publish, task_postrun, task_prerun, worker_process_shutdown
from prometheus_client import multiprocess

from kindgi_console import logs
from traces.store import heartbeat


@beat_init.connect  # type: ignore[untyped-decorator]  # Celery's signals have no types
def beat_heartbeat(**_: Any) -> None:
    """Beat writes a heartbeat row too (`beat@<host>`): `/healthz/workers` reads it."""
    heartbeat.start(f"{heartbeat.BEAT_PREFIX}{socket.gethostname()}")


@before_task_publish.connect  # type: ignore[untyped-decorator]  # Celery's signals have no types
def carry_the_request(headers: Any = None, **_: Any) -> None:
    if headers is not None:
        logs.mark_sent_task(headers)


@task_prerun.connect  # type: ignore[untyped-decorator]  # Celery's signals have no types
def task_started(task_id: str = "", **_: Any) -> None:
    logs.task_started(task_id)


@task_postrun.connect  # type: ignore[untyped-decorator]  # Celery's signals have no types
def task_ended(task_id: str = "", task: Any = None, state: str | None = None, **_: Any) -> None:
    logs.task_ended(task_id, getattr(task, "name", "?"), state or "?", getattr(task, "request", None))


@worker_process_shutdown.connect  # type: ignore[untyped-decorator]  # Celery's signals have no types
def forget_live_metrics(pid: int | None = None, **_: Any) -> None:
    multiprocess.mark_process_dead(pid or os.getpid())  # type: ignore[no-untyped-call]
