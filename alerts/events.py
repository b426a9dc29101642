"""The write paths' events that alert rules fire on: a run failed, an upload failed.

traces sends its signals (traces.signals) inside the transaction that marks the failure;
the receivers here only queue `alerts.tasks.record_event` once that transaction commits,
so the failing path does no alert work itself.
"""

from __future__ import annotations

from typing import Any

from django.db import transaction

from alerts.models import AlertRule


def _queue(kind: str, tenant_id: int, key: str, summary: str, figures: dict[str, Any]) -> None:
    from alerts.tasks import record_event

    transaction.on_commit(lambda: record_event.delay(kind, tenant_id, key, summary, figures), robust=True)


def on_run_failed(sender: Any, *, evaluation_id: int, tenant_id: int, error: str, **kwargs: Any) -> None:
    _queue(AlertRule.Kind.RUN_FAILED, tenant_id, f"evaluation:{evaluation_id}",
           f"evaluation run {evaluation_id} failed: {error[:300]}",
           {"evaluation": evaluation_id, "error": error[:1000]})


def on_upload_failed(sender: Any, *, upload_id: int, tenant_id: int, error: str, **kwargs: Any) -> None:
    _queue(AlertRule.Kind.UPLOAD_FAILED, tenant_id, f"upload:{upload_id}",
           f"upload {upload_id} failed: {error[:300]}", {"upload": upload_id, "error": error[:1000]})


def connect() -> None:
    from traces import signals

    signals.run_failed.connect(on_run_failed, dispatch_uid="alerts.run_failed")
    signals.upload_failed.connect(on_upload_failed, dispatch_uid="alerts.upload_failed")
