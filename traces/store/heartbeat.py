"""Workers' heartbeats: each Celery worker writes a row every KINDGI_WORKER_HEARTBEAT_SECONDS
(a thread of its main process, started when the worker is ready), and pages of work that
waits for a worker (a queued or running run, an upload) say when none has been seen.
"""

from __future__ import annotations

import logging
import os
import threading
from datetime import datetime, timedelta

from django.conf import settings
from django.db import DatabaseError, connection
from django.db.models import Max
from django.utils import timezone

from traces.models import WorkerHeartbeat

logger = logging.getLogger(__name__)

#: The host name of beat's row (`beat@<host>`); every other row is a worker's.
BEAT_PREFIX = "beat@"


def beat(hostname: str, pid: int) -> None:
    WorkerHeartbeat.objects.update_or_create(hostname=hostname, defaults={"pid": pid, "seen_at": timezone.now()})


def last_seen() -> datetime | None:
    workers = WorkerHeartbeat.objects.exclude(hostname__startswith=BEAT_PREFIX)
    seen: datetime | None = workers.aggregate(last=Max("seen_at"))["last"]
    return seen


def quiet_since() -> datetime:
    """A process whose row is older than this has missed three beats: it is stuck or gone."""
    return timezone.now() - timedelta(seconds=3 * settings.KINDGI_WORKER_HEARTBEAT_SECONDS)


def worker_missing() -> dict[str, datetime | None] | None:
    """`{"last_seen": …}` when no worker has beaten lately (three beats missed), else None."""
    seen = last_seen()
    if seen is not None and seen >= quiet_since():
        return None
    return {"last_seen": seen}


class Heartbeat(threading.Thread):
    """Beats until stopped; a database fault skips a beat, never ends the worker."""

    def __init__(self, hostname: str) -> None:
        super().__init__(name="kindgi-heartbeat", daemon=True)
        self.hostname = hostname
        self.stopping = threading.Event()

    def run(self) -> None:
        try:
            while True:
                self._beat_once()
                if self.stopping.wait(settings.KINDGI_WORKER_HEARTBEAT_SECONDS):
                    return
        finally:
            connection.close()

    def _beat_once(self) -> None:
        try:
            beat(self.hostname, os.getpid())
        except DatabaseError:
            logger.warning("could not write the worker's heartbeat", exc_info=True)

    def stop(self) -> None:
        self.stopping.set()
        self.join(timeout=5)
        try:
            WorkerHeartbeat.objects.filter(hostname=self.hostname, pid=os.getpid()).delete()
        except DatabaseError:
            logger.warning("could not remove the worker's heartbeat", exc_info=True)


_running: list[Heartbeat] = []


def start(hostname: str) -> None:
    """Start beating for this worker process (once)."""
    if not _running:
        _running.append(Heartbeat(hostname))
        _running[0].start()


def stop() -> None:
    while _running:
        _running.pop().stop()
