"""gunicorn's configuration, read from the folder it is started in (the checkout, as the
README's command runs it): no option of the command is set here.

`child_exit`: a worker that ended (restarted, killed) leaves its metrics files behind in
prometheus-client's multi-process folder; marking it dead drops its live values (the
counts it made stay in the sums `/metrics` answers).
"""

from __future__ import annotations

import os
from typing import Any


def child_exit(server: Any, worker: Any) -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "kindgi_console.settings")
    from django.conf import settings
    from prometheus_client import multiprocess

    multiprocess.mark_process_dead(worker.pid, str(settings.KINDGI_METRICS_DIR))
