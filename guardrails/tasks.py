"""Worker start-up for guardrails: the deployment's engine is built before the first task.

Loading the check packs in each worker process as it starts means an invalid pack stops
the worker with a message naming the pack, instead of failing the first evaluation, and
no task pays for the import.
"""

from __future__ import annotations

from typing import Any

from celery.signals import worker_process_init

from guardrails import deployment


@worker_process_init.connect
def build_engine(**_: Any) -> None:
    deployment.engine()
