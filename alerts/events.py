"""The write paths' events that alert rules act on: a run failed, an upload failed, a
review changed a guardrail's precision.

traces sends its signals (traces.store.signals) inside the transaction of the change; the
receivers here only queue a task (`record_event`, `evaluate_precision`) once that
transaction commits, so the write path does no alert work itself.
"""

from __future__ import annotations

from typing import Any

from django.db import transaction

from alerts.models import AlertRule
from kindgi_console import tasking
from traces.store import signals


def _queue(kind: str, tenant_id: int, key: str, summary: str, figures: dict[str, Any]) -> None:
    transaction.on_commit(
        lambda: tasking.send("alerts.tasks.record_event", kind, tenant_id, key, summary, figures), robust=True
    )


def on_run_failed(sender: Any, *, evaluation_id: int, tenant_id: int, error: str, **kwargs: Any) -> None:
    _queue(
        AlertRule.Kind.RUN_FAILED,
        tenant_id,
        f"evaluation:{evaluation_id}",
        f"evaluation run {evaluation_id} failed: {error[:300]}",
        {"evaluation": evaluation_id, "error": error[:1000]},
    )


def on_upload_failed(sender: Any, *, upload_id: int, tenant_id: int, error: str, **kwargs: Any) -> None:
    _queue(
        AlertRule.Kind.UPLOAD_FAILED,
        tenant_id,
        f"upload:{upload_id}",
        f"upload {upload_id} failed: {error[:300]}",
        {"upload": upload_id, "error": error[:1000]},
    )


def on_violations_reviewed(sender: Any, *, tenant_ids: list[int], violation_ids: list[int], **kwargs: Any) -> None:
    """A review changed precision: evaluate the tenants' precision rules once it commits."""
    transaction.on_commit(
        lambda: tasking.send("alerts.tasks.evaluate_precision", tenant_ids, violation_ids), robust=True
    )


def connect() -> None:
    signals.run_failed.connect(on_run_failed, dispatch_uid="alerts.run_failed")
    signals.upload_failed.connect(on_upload_failed, dispatch_uid="alerts.upload_failed")
    signals.violations_reviewed.connect(on_violations_reviewed, dispatch_uid="alerts.violations_reviewed")
