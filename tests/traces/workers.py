"""Real Celery worker processes for tests: the configured broker, the test database.

The broker is CELERY_BROKER_URL (Redis in CI) or the filesystem transport of the embedded
default. The worker opens the database the test uses (for SQLite the test database is a
file under var/, see settings). A broker that cannot be reached fails the test.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import quote

from django.conf import settings
from django.db import connection

from kindgi_console.celery import app
from kindgi_console.workers import worker_command

ROOT = Path(__file__).resolve().parents[2]


def test_database_url() -> str:
    """The URL of the database this test process uses, for a worker process to open."""
    db = connection.settings_dict
    if db["ENGINE"].endswith("sqlite3"):
        return f"sqlite:///{db['NAME']}"
    auth = quote(db["USER"] or "")
    if db.get("PASSWORD"):
        auth += ":" + quote(db["PASSWORD"])
    return f"postgres://{auth}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}"


def require_broker() -> None:
    """Fail (never skip) when the configured broker cannot be reached."""
    try:
        with app.connection_for_write() as conn:
            conn.ensure_connection(max_retries=2, timeout=3)
    except Exception as error:
        required = os.environ.get("KINDGI_REQUIRE_SERVICES") == "1"
        raise AssertionError(
            f"the Celery broker {settings.CELERY_BROKER_URL} cannot be reached ({error})"
            + (" and KINDGI_REQUIRE_SERVICES=1" if required else "")
        ) from error


def purge_queue() -> None:
    """Drop messages that earlier runs left in the queues (every one of KINDGI_QUEUES), and
    on Redis those a killed worker took and never acknowledged (`drop_unacked`)."""
    for folder in ("data_folder_in", "processed_folder", "control_folder"):
        path = settings.CELERY_BROKER_TRANSPORT_OPTIONS.get(folder)
        if isinstance(path, str):
            Path(path).mkdir(parents=True, exist_ok=True)
    app.control.purge()
    drop_unacked()


def drop_unacked() -> int:
    """Redis keeps a message a worker took but never acknowledged (an earlier test killed the
    worker) in kombu's `unacked` hash, and any worker puts it back in its queue once the
    visibility timeout has passed: minutes later, in another test of this process. Drop
    those of this process's queues (the other process's are its own); how many."""
    ours = set(settings.KINDGI_QUEUES.values())
    dropped = 0
    with app.connection_for_write() as connection:
        channel = connection.default_channel
        if not hasattr(channel, "unacked_key"):  # the filesystem broker keeps none
            return 0
        client = channel.client
        for tag, raw in client.hgetall(channel.unacked_key).items():
            _message, exchange, routing_key = json.loads(raw)
            if exchange in ours or routing_key in ours:
                client.zrem(channel.unacked_index_key, tag)
                dropped += client.hdel(channel.unacked_key, tag)
    return dropped


class Worker:
    """`celery -A kindgi_console worker` in its own process group, killed at the end; on
    every queue, or on those of `roles` (a test of their separation)."""

    def __init__(
        self,
        name: str,
        log_dir: Path,
        *,
        concurrency: int = 2,
        roles: Sequence[str] | None = None,
        beat: bool = False,
        quiet: bool = True,
        **env: Any,
    ) -> None:
        """`roles`: the queues served (every one when None); `beat`: the periodic check
        embedded (its schedule under `log_dir`); `quiet=False`: gossip and mingle as a
        deployment's worker has them."""
        self.name = name
        self.log = log_dir / f"{name}.log"
        environ = {
            **os.environ,
            "DATABASE_URL": test_database_url(),
            "CELERY_BROKER_URL": settings.CELERY_BROKER_URL,
            "CELERY_TASK_ALWAYS_EAGER": "false",
            "KINDGI_VAR_DIR": str(settings.VAR_DIR),
            **{key: str(value) for key, value in env.items()},
        }
        schedule = str(log_dir / f"{name}-schedule") if beat else None
        command = worker_command(concurrency=concurrency, name=name, quiet=quiet, beat_schedule=schedule, roles=roles)
        with self.log.open("wb") as out:
            self.process = subprocess.Popen(
                command, cwd=ROOT, env=environ, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
            )

    def kill(self) -> None:
        """SIGKILL the worker and its pool processes at once: nothing is acknowledged."""
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(timeout=10)

    def stop(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.kill()

    def output(self) -> str:
        return self.log.read_text(errors="replace")[-6000:]

    def idle(self) -> bool:
        """Whether every task this worker has received has ended, by its log."""
        log = self.log.read_text(errors="replace")
        return set(_RECEIVED.findall(log)) <= set(_ENDED.findall(log))


# Celery's worker log: `Task name[id] received`, then `succeeded in`, `raised ...`, `retry`...
_RECEIVED = re.compile(r"Task [\w.]+\[([\w-]+)\] received")
_ENDED = re.compile(r"Task [\w.]+\[([\w-]+)\] (?:succeeded|raised|retry|ignored|rejected|failed)")


def wait_for(condition: Callable[[], bool], timeout: float, what: str, worker: Worker | None = None) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        if worker is not None and worker.process.poll() is not None:
            raise AssertionError(f"the worker exited while waiting for {what}:\n{worker.output()}")
        time.sleep(0.05)
    log = worker.output() if worker is not None else ""
    raise AssertionError(f"timed out after {timeout} s waiting for {what}\n{log}")


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def answers(port: int) -> bool:
    """Whether something accepts connections on 127.0.0.1:`port`."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


@contextmanager
def serving(process: subprocess.Popen[bytes], port: int, seconds: float, what: str) -> Iterator[None]:
    """While `process` serves on `port` (waited for, up to `seconds`); terminated after."""
    try:
        wait_for(lambda: answers(port), seconds, what)
        yield
    finally:
        process.terminate()
        process.wait(timeout=10)


class RedisServer:
    """A redis-server of the test's own, on its own port, stopped and started at will."""

    def __init__(self) -> None:
        self.port = free_port()
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        self.process = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--save", "", "--appendonly", "no"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        wait_for(lambda: answers(self.port), 10, "redis-server to start")

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=10)
        wait_for(lambda: not answers(self.port), 10, "redis-server to stop")
