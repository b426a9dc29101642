"""The command line of a Celery worker process: one definition for `runconsole`, the tests'
real workers and the benchmarks, so that they all start the worker a deployment runs.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable

from django.conf import settings


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
