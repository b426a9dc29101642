"""The command line of a Celery worker process: one definition for `runconsole`, the tests'
real workers and the benchmarks, so that they all start the worker a deployment runs;
and how a worker comes back from a lost broker (`Consumer`, `RecoverOnReconnect`).
"""

from __future__ import annotations

import functools
import logging
import sys
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any

import celery.worker.consumer
from celery import bootsteps
from django.conf import settings
from kombu.exceptions import OperationalError as BrokerError

logger = logging.getLogger(__name__)


def worker_command(
    *,
    concurrency: int,
    loglevel: str = "INFO",
    name: str | None = None,
    beat_schedule: str | None = None,
    quiet: bool = False,
    heartbeat: bool = True,
    roles: Iterable[str] | None = None,
) -> list[str]:
    """`python -m celery -A kindgi_console worker` on the queues of `roles` (keys of
    KINDGI_QUEUES: runtime, runs, periodic, deliveries), every queue when None.

    `name`: the worker's node name (`name@%h`); `beat_schedule`: embed the periodic check
    (`--beat`), keeping its schedule in that file; `quiet`: no gossip or mingle with other
    workers at start (a short-lived worker); `heartbeat=False`: no worker heartbeats either.
    """
    command = [sys.executable, "-m", "celery", "-A", "kindgi_console", "worker"]
    queues = ",".join(settings.KINDGI_QUEUES[role] for role in (settings.KINDGI_QUEUES if roles is None else roles))
    command += ["-Q", queues, "--concurrency", str(concurrency), "--loglevel", loglevel]
    if name is not None:
        command += ["-n", f"{name}@%h"]
    if beat_schedule is not None:
        command += ["--beat", "--schedule", beat_schedule]
    if quiet:
        command += ["--without-gossip", "--without-mingle"]
    if not heartbeat:
        command.append("--without-heartbeat")
    return command


#: The longest pause between two attempts to reach a broker that was lost (Celery's own
#: grows to 30 s): a worker is back within seconds of the broker.
RECONNECT_INTERVAL_MAX = 2.0


class Consumer(celery.worker.consumer.Consumer):  # type: ignore[misc]
    """Celery's consumer (`CELERY_WORKER_CONSUMER`), with the recovery check after a
    reconnection (`RecoverOnReconnect`), trying a lost broker again every second or two,
    for ever (`CELERY_BROKER_CONNECTION_MAX_RETRIES` is None), rather than after pauses
    that grow to 30 s (Celery passes none of its own to `ensure_connection`)."""

    class Blueprint(celery.worker.consumer.Consumer.Blueprint):  # type: ignore[misc]
        default_steps = [*celery.worker.consumer.Consumer.Blueprint.default_steps, f"{__name__}:RecoverOnReconnect"]

    def ensure_connected(self, conn: Any) -> Any:
        conn.ensure_connection = functools.partial(
            conn.ensure_connection, interval_start=1, interval_step=1, interval_max=RECONNECT_INTERVAL_MAX
        )
        return super().ensure_connected(conn)


class RecoverOnReconnect(bootsteps.StartStopStep):  # type: ignore[misc]
    """Each time the worker connects to the broker again after losing it, it sends the
    recovery check for the work queued before (`requeue_expired_work(lost_before=…)`).

    The broker may have lost those messages (a Redis restarted without persistence), and
    the ones this worker had taken and not begun are held back by Redis until the
    visibility timeout: without the check, queued work would wait for its lease
    (`KINDGI_QUEUED_LEASE_SECONDS`, minutes). Work that is sent twice runs once: a task
    finds its chunk, upload or batch already taken, and does nothing.
    """

    requires = ("celery.worker.consumer.tasks:Tasks",)

    def __init__(self, parent: Any, **kwargs: Any) -> None:
        super().__init__(parent, **kwargs)
        self.connections = 0

    def start(self, parent: Any) -> None:
        self.connections += 1
        if self.connections == 1:
            return  # a worker that starts runs the check anyway (`traces.tasks.recover_on_worker_start`)
        lost_before = datetime.now(UTC).isoformat()
        try:
            parent.app.send_task("traces.tasks.requeue_expired_work", kwargs={"lost_before": lost_before})
        except (BrokerError, *parent.connection_errors, *parent.channel_errors, OSError):
            logger.warning("could not send the recovery check after reconnecting; the periodic check will run it")
        else:
            logger.warning("connected to the broker again: the work queued before %s is sent again", lost_before)
