"""Domain code sends tasks by their registered names (kindgi_console.tasking): every name it
sends is a task that a tasks module registers, and routes to one of the console's queues."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from django.conf import settings

from kindgi_console.celery import app

ROOT = Path(__file__).resolve().parent.parent
SENT = re.compile(r"tasking\.send\(\s*\"([\w.]+)\"")


def sent_names() -> set[str]:
    names: set[str] = set()
    for package in ("kindgi_console", "guardrails", "traces", "alerts"):
        for path in (ROOT / package).rglob("*.py"):
            names.update(SENT.findall(path.read_text()))
    return names


def test_every_name_domain_code_sends_is_a_registered_routed_task() -> None:
    names = sent_names()
    assert {"traces.tasks.evaluate_chunk", "traces.tasks.process_upload", "alerts.tasks.deliver"} <= names
    app.loader.import_default_modules()
    assert names <= set(app.tasks), names - set(app.tasks)
    assert names <= set(settings.CELERY_TASK_ROUTES), names - set(settings.CELERY_TASK_ROUTES)


def test_a_process_that_never_imported_a_tasks_module_sends_by_name() -> None:
    """A web process imports no tasks module; sending finds the task all the same (and an
    unknown name is refused, not sent into a queue no worker reads)."""
    code = (
        "import django, sys; django.setup()\n"
        "from celery.exceptions import NotRegistered\n"
        "from kindgi_console import tasking\n"
        "assert 'traces.runs.tasks' not in sys.modules\n"
        "tasking.send('traces.tasks.run_preview', 0)\n"  # into an in-memory broker
        "assert 'traces.runs.tasks' in sys.modules\n"
        "try:\n"
        "    tasking.send('traces.tasks.no_such_task')\n"
        "except NotRegistered:\n"
        "    print('refused')\n"
    )
    env = {
        "DJANGO_SETTINGS_MODULE": "kindgi_console.settings",
        "PATH": "/usr/bin:/bin",
        "CELERY_BROKER_URL": "memory://",
    }
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "refused"
