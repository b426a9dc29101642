"""The embedded default's filesystem broker works in any process, not only under runconsole."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.traces.workers import ROOT

SEND_A_TASK = """
import django
django.setup()
from traces.ingest.tasks import evaluate_ingested
evaluate_ingested.delay([1])
"""


def test_a_process_that_is_not_runconsole_can_queue_work_on_a_fresh_install(tmp_path: Path) -> None:
    """`manage.py runserver` (or gunicorn) ingesting a batch sends a task: the broker's
    folders must exist although runconsole never ran."""
    environ = {
        key: value
        for key, value in os.environ.items()
        if key not in ("CELERY_BROKER_URL", "DATABASE_URL", "CELERY_TASK_ALWAYS_EAGER")
    }
    environ.update(KINDGI_VAR_DIR=str(tmp_path / "var"), DJANGO_SETTINGS_MODULE="kindgi_console.settings")
    done = subprocess.run(
        [sys.executable, "-c", SEND_A_TASK],
        cwd=ROOT,
        env=environ,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert len(list((tmp_path / "var" / "broker" / "queue").iterdir())) == 1
