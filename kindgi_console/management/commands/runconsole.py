"""Serve the console with a background worker: the README's run command.

On the embedded default (no CELERY_BROKER_URL) the worker uses Celery's filesystem
transport under var/broker, so evaluations and uploads run in the background with no
service to install. A deployment runs `celery -A kindgi_console worker` processes
against Redis instead, on as many machines as it needs.
"""

from __future__ import annotations

import ctypes
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandParser

DEMO_LOGINS = ("admin", "author", "acme-reviewer", "globex-reviewer")
PR_SET_PDEATHSIG = 1  # linux/prctl.h
DEMO_PASSWORD = "kindgi-demo"  # noqa: S105 - the demo's published local-only password


class Command(BaseCommand):
    help = "Serve the console and start a Celery worker beside it."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("addrport", nargs="?", default="127.0.0.1:8000")
        parser.add_argument("--no-worker", action="store_true", help="do not start a worker")

    def handle(self, *args: Any, **options: Any) -> None:
        addrport: str = options["addrport"]
        self._prepare_broker_folders()
        worker = None if options["no_worker"] else self._start_worker()
        self._print_banner(addrport, worker is not None)
        # A SIGTERM (a service manager, `kill`) ends the server through `finally`, which
        # stops the worker too; a SIGKILL is covered by the worker's parent-death signal.
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
        try:
            call_command("runserver", addrport, use_reloader=False)
        finally:
            if worker is not None:
                _stop(worker)

    def _prepare_broker_folders(self) -> None:
        for key in ("data_folder_in", "processed_folder", "control_folder"):
            folder = settings.CELERY_BROKER_TRANSPORT_OPTIONS.get(key)
            if isinstance(folder, str):
                Path(folder).mkdir(parents=True, exist_ok=True)

    def _start_worker(self) -> subprocess.Popen[bytes]:
        # --beat runs the periodic check that sends again the chunks of a lost worker; a
        # deployment runs one `celery -A kindgi_console beat` process instead.
        command = [
            sys.executable, "-m", "celery", "-A", "kindgi_console", "worker",
            "--loglevel", "WARNING", "--concurrency", "2", "-Q", settings.CELERY_TASK_DEFAULT_QUEUE,
            "--beat", "--schedule", settings.CELERY_BEAT_SCHEDULE_FILENAME,
        ]
        return subprocess.Popen(command, cwd=settings.BASE_DIR, preexec_fn=_die_with_parent)

    def _print_banner(self, addrport: str, with_worker: bool) -> None:
        host, _, port = addrport.rpartition(":")
        address = f"http://{host or '127.0.0.1'}:{port}/"
        broker = settings.CELERY_BROKER_URL.split("@")[-1]
        lines = [
            "",
            f"Kindgi Console is at {address}",
            f"Sign in as {', '.join(DEMO_LOGINS)} with the password '{DEMO_PASSWORD}' (demo data, local use only).",
            f"Background worker: {'running on ' + broker if with_worker else 'not started'}.",
            "",
        ]
        self.stdout.write("\n".join(lines))


def _die_with_parent() -> None:
    """In the worker, before exec: Linux sends it SIGTERM when the console process dies."""
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


def _stop(worker: subprocess.Popen[bytes]) -> None:
    """Ask the worker to finish its task; kill it if it has not within a few seconds.

    Killing loses nothing: tasks are acknowledged late and a run's chunks are leased, so
    the next worker takes them over.
    """
    worker.terminate()
    try:
        worker.wait(timeout=10)
    except subprocess.TimeoutExpired:
        worker.kill()
        worker.wait()
