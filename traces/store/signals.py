"""Signals of the write paths, sent inside the transaction of the change they announce.

`run_failed(evaluation_id, tenant_id, error)`: an evaluation run failed for good;
`upload_failed(upload_id, tenant_id, error)`: an upload could not be read;
`violations_reviewed(tenant_ids, violation_ids)`: reviewers moved violations;
`upload_evaluation_asked(upload)`: an upload asked to be evaluated has been stored (runs start
its run: traces.apps connects it, so that ingestion imports nothing of runs).
Apps that depend on traces (alerts) listen, so traces imports none of them.
"""

from django.dispatch import Signal

from traces.models import Evaluation

run_failed = Signal()
upload_failed = Signal()
violations_reviewed = Signal()
upload_evaluation_asked = Signal()


def announce_run_failed(evaluation_id: int, error: str) -> None:
    """Send `run_failed` for a run just marked failed (in the same transaction)."""
    tenant_id = Evaluation.objects.filter(pk=evaluation_id).values_list("tenant_id", flat=True).first()
    if tenant_id is not None:
        run_failed.send(Evaluation, evaluation_id=evaluation_id, tenant_id=tenant_id, error=error)
