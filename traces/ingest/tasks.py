"""Background work of ingestion: the runtime evaluation of an ingested batch (out of the
outbox), an upload's next piece, and the OTLP turns whose agent span never came.

Thin shells around `traces.ingest`; the registered names are `traces.tasks.*`
(kindgi_console.tasking).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from celery import Task, shared_task

from kindgi_console.tasking import TASK_OPTIONS
from traces.ingest import evaluate, outbox, uploads
from traces.ingest.otlp import turns


@shared_task(name="traces.tasks.evaluate_ingested", **TASK_OPTIONS)
def evaluate_ingested(trace_ids: Sequence[int], pending_id: int | None = None) -> None:
    """Runtime-mode evaluation of one ingested batch (the traces that are still there),
    then out of the outbox (`pending_id`)."""
    evaluate.evaluate_stored_traces(trace_ids)
    outbox.done(pending_id)


class UploadTask(Task):  # type: ignore[misc]
    """An upload whose piece fails for good (not a transient fault) fails, with the reason."""

    def on_failure(self, exc: BaseException, task_id: str, args: Any, kwargs: Any, einfo: Any) -> None:
        upload_id = args[0] if args else kwargs.get("upload_id")
        uploads.fail_upload(upload_id, f"{type(exc).__name__}: {exc}")


@shared_task(name="traces.tasks.process_upload", base=UploadTask, **TASK_OPTIONS)
def process_upload(upload_id: int) -> None:
    """Read the next piece of an uploaded file of traces, storing its good lines in batches."""
    uploads.process_upload(upload_id)


@shared_task(name="traces.tasks.complete_waiting_otlp_turns", **TASK_OPTIONS)
def complete_waiting_otlp_turns() -> int:
    """Store the OTLP turns whose agent span has not come in time, marked incomplete (beat runs this)."""
    return turns.complete_waiting()
