"""Serve the console with a background worker: the README's run command.

On the embedded default (no CELERY_BROKER_URL) the worker uses Celery's filesystem
transport under var/broker, so evaluations and uploads run in the background with no
service to install; a worker that dies is started again (`WorkerSupervisor`). A
deployment runs `celery -A kindgi_console worker` processes against Redis instead, on as
many machines as it needs.
"""

from __future__ import annotations

import ctypes
import signal
import socket
import subprocess
import sys
import threading
import time
from typing import Any

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import DatabaseError

from kindgi_console.audit.log import acting_as
from kindgi_console.workers import worker_command
from traces import demo

DEMO_LOGINS = ("admin", "author", "acme-reviewer", "globex-reviewer")
PR_SET_PDEATHSIG = 1  # linux/prctl.h
DEMO_PASSWORD = "kindgi-demo"  # noqa: S105 - the demo's published local-only password


class Command(BaseCommand):
    help = "Serve the console and start a Celery worker beside it."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("addrport", nargs="?", default="127.0.0.1:8000")
        parser.add_argument("--no-worker", action="store_true", help="do not start a worker")
        parser.add_argument(
            "--check-address",
            action="store_true",
            help="only check that the address is free (make run does, before migrating)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        addrport: str = options["addrport"]
        refuse_busy_address(addrport)
        if options["check_address"]:
            return
        moved = point_demo_judges(addrport) if settings.KINDGI_DEMO_JUDGE else []
        supervisor = None if options["no_worker"] else WorkerSupervisor(self.stderr)
        self._print_banner(addrport, supervisor is not None, moved)
        # A SIGTERM (a service manager, `kill`) ends the server through `finally`, which
        # stops the worker too; a SIGKILL is covered by the worker's parent-death signal.
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
        if supervisor is not None:
            supervisor.start()
        try:
            call_command("runserver", addrport, use_reloader=False)
        finally:
            if supervisor is not None:
                supervisor.stop()

    def _print_banner(self, addrport: str, with_worker: bool, moved: list[str]) -> None:
        address = console_url(addrport) + "/"
        broker = settings.CELERY_BROKER_URL.split("@")[-1]
        lines = [
            "",
            f"Kindgi Console is at {address}",
            f"Sign in as {', '.join(DEMO_LOGINS)} with the password '{DEMO_PASSWORD}' (demo data, local use only).",
            f"Background worker: {'running on ' + broker if with_worker else 'not started'}.",
        ]
        if settings.KINDGI_DEMO_JUDGE:
            lines.append(f"Demo judge (KINDGI_DEMO_JUDGE): {address}demo-judge/v1/chat/completions")
        if moved:
            lines.append(f"Demo judge models now served there: {', '.join(moved)}.")
        lines.append("")
        self.stdout.write("\n".join(lines))


def console_url(addrport: str) -> str:
    """The console's own address for `addrport`, as other processes on this machine reach it."""
    host, _, port = addrport.rpartition(":")
    host = host or "127.0.0.1"
    return f"http://{'127.0.0.1' if host in ('0.0.0.0', '0') else host}:{port}"  # noqa: S104 - not a bind


def point_demo_judges(addrport: str) -> list[str]:
    """Point the demo's judge models at this console's demo judge; nothing when the demo's
    tables are not there yet (a database not migrated is migrate's to report)."""
    try:
        with acting_as("command:runconsole"):
            return demo.point_judges_at(console_url(addrport))
    except DatabaseError:
        return []


def refuse_busy_address(addrport: str) -> None:
    """Stop, before anything starts or is announced, when another process holds the address.

    The probe binds as the development server does (SO_REUSEADDR), so a port left in
    TIME_WAIT by a previous run is not mistaken for a busy one.
    """
    host, _, port = addrport.rpartition(":")
    host = host.strip("[]") or "127.0.0.1"
    try:
        family, kind, proto, _name, address = socket.getaddrinfo(host, int(port), type=socket.SOCK_STREAM)[0]
    except (ValueError, socket.gaierror) as error:
        raise CommandError(f"{addrport!r} is not an address to serve on (HOST:PORT): {error}") from None
    with socket.socket(family, kind, proto) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(address)
        except OSError as error:
            raise CommandError(
                f"port {port} on {host} is busy ({error.strerror}): another process is serving there. "
                "Stop it, or choose another port: PORT=8001 make run"
            ) from None


def _die_with_parent() -> None:
    """In the worker, before exec: Linux sends it SIGTERM when the console process dies."""
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


def start_worker() -> subprocess.Popen[bytes]:
    """A Celery worker beside the server, with the periodic check embedded (--beat); a
    deployment runs one `celery -A kindgi_console beat` process instead."""
    command = worker_command(concurrency=2, loglevel="WARNING", beat_schedule=settings.CELERY_BEAT_SCHEDULE_FILENAME)
    return subprocess.Popen(command, cwd=settings.BASE_DIR, preexec_fn=_die_with_parent)


class WorkerSupervisor(threading.Thread):
    """Keeps a worker running beside the server: one that exits (killed, out of memory) is
    started again, after a pause that grows while it keeps dying at once (up to a minute)."""

    QUICK_EXIT_SECONDS = 30.0

    def __init__(self, out: Any) -> None:
        super().__init__(name="kindgi-worker-supervisor", daemon=True)
        self.out = out
        self.stopping = threading.Event()
        self.lock = threading.Lock()
        self.worker: subprocess.Popen[bytes] | None = start_worker()
        self.started_at = time.monotonic()
        self.quick_exits = 0

    def run(self) -> None:
        while not self.stopping.wait(1.0):
            with self.lock:
                worker = self.worker
            if worker is None or worker.poll() is None:
                continue
            self._note_exit(worker.returncode)
            if self.stopping.wait(min(60.0, 2.0**self.quick_exits - 1)):
                return
            with self.lock:
                if not self.stopping.is_set():
                    self.worker = start_worker()
                    self.started_at = time.monotonic()

    def _note_exit(self, code: int | None) -> None:
        quick = time.monotonic() - self.started_at < self.QUICK_EXIT_SECONDS
        self.quick_exits = self.quick_exits + 1 if quick else 0
        self.out.write(f"The background worker exited (code {code}); starting a new one.")

    def stop(self) -> None:
        self.stopping.set()
        with self.lock:
            if self.worker is not None:
                _stop(self.worker)
                self.worker = None


def _stop(worker: subprocess.Popen[bytes]) -> None:
    """Ask the worker to finish its task; kill it if it has not within a few seconds, or
    at once when a second Ctrl-C or SIGTERM comes while waiting (the impatient operator's
    second press must not leave the worker running on, orphaned).

    Killing loses nothing: tasks are acknowledged late and a run's chunks are leased, so
    the next worker takes them over.
    """
    worker.terminate()
    try:
        worker.wait(timeout=10)
    except subprocess.TimeoutExpired:
        worker.kill()
        worker.wait()
    except BaseException:  # SystemExit (SIGTERM) or KeyboardInterrupt while waiting
        worker.kill()
        worker.wait()
        raise
