"""Background work of the store: retention, and the worker's heartbeat row.

The registered names are `traces.tasks.*` (kindgi_console.tasking).
"""

from __future__ import annotations

import os
from typing import Any

from celery import shared_task
from celery.signals import worker_ready, worker_shutdown

from kindgi_console.tasking import TASK_OPTIONS
from traces.store import heartbeat, retention


@shared_task(name="traces.tasks.apply_retention", **TASK_OPTIONS)
def apply_retention() -> int:
    """Delete what tenants' retention policies no longer keep (beat runs this periodically)."""
    return retention.apply_retention()


@worker_ready.connect
def beat_while_running(sender: Any = None, **_: Any) -> None:
    """The worker's heartbeat row, which pages of waiting work read."""
    heartbeat.start(getattr(sender, "hostname", None) or f"worker-{os.getpid()}")


@worker_shutdown.connect
def stop_beating(**_: Any) -> None:
    heartbeat.stop()
