"""Review queues and claims: a violation's `queue` (the `escalateTo` of an escalate guardrail's
revision), who claimed it (`assignee`) and since when (`assigned_at`).

The new columns are nullable with no default: adding them rewrites no row. The violations
stored before get their queue from their revision's document, one UPDATE per escalate
revision over the guardrail's index (a revision's document is the one it was judged by: an
older revision of a guardrail that escalates today may not have). Then the three partial
indexes are built, CONCURRENTLY on PostgreSQL (traces/migration_operations.py): they hold
only queued or claimed violations, so they are small and the build takes no write lock.
"""

from collections.abc import Mapping
from typing import Any

from django.apps.registry import Apps
from django.db import migrations, models
from django.db.backends.base.schema import BaseDatabaseSchemaEditor

from traces.migration_operations import AddIndexConcurrently

# As `traces.models.escalation_queue` says today, frozen here as migrations are.
ESCALATE, DEFAULT_QUEUE, QUEUE_LENGTH = "escalate", "escalations", 200


def queue_of(document: Any) -> str | None:
    action = document.get("action") if isinstance(document, Mapping) else None
    if not isinstance(action, Mapping) or action.get("on-violation") != ESCALATE:
        return None
    named = action.get("escalateTo")
    queue = named.strip()[:QUEUE_LENGTH] if isinstance(named, str) else ""
    return queue or DEFAULT_QUEUE


def fill_queues(apps: Apps, schema_editor: BaseDatabaseSchemaEditor) -> None:
    """The queue of every violation of an escalate revision, from the revision's document."""
    revisions = apps.get_model("guardrails", "GuardrailRevision").objects.order_by("pk")
    violations = apps.get_model("traces", "Violation").objects
    for pk, guardrail_id, document in revisions.values_list("pk", "guardrail_id", "document").iterator(500):
        queue = queue_of(document)
        if queue is not None:
            violations.filter(guardrail_id=guardrail_id, revision_id=pk, queue__isnull=True).update(queue=queue)


class Migration(migrations.Migration):
    dependencies = [("guardrails", "0008_guardrail_enforced_revision"), ("traces", "0029_status_indexes_for_metrics")]

    # The indexes are built CONCURRENTLY on PostgreSQL; the backfill runs in a transaction of its own.
    atomic = False

    operations = [
        migrations.AddField(
            model_name="violation",
            name="queue",
            field=models.CharField(
                blank=True, help_text="the review queue of an escalate guardrail", max_length=200, null=True
            ),
        ),
        migrations.AddField(
            model_name="violation",
            name="assignee",
            field=models.CharField(
                blank=True, help_text="who claimed it: a user name, or an API key's label", max_length=200, null=True
            ),
        ),
        migrations.AddField(
            model_name="violation", name="assigned_at", field=models.DateTimeField(blank=True, null=True)
        ),
        migrations.RunPython(fill_queues, migrations.RunPython.noop, atomic=True),
        AddIndexConcurrently(
            model_name="violation",
            index=models.Index(
                condition=models.Q(("queue__isnull", False)),
                fields=["tenant", "queue", "-created_at", "-id"],
                name="violation_queue_time",
            ),
        ),
        AddIndexConcurrently(
            model_name="violation",
            index=models.Index(
                condition=models.Q(("queue__isnull", False)),
                fields=["tenant", "state", "queue", "created_at", "id"],
                name="violation_queue_state",
            ),
        ),
        AddIndexConcurrently(
            model_name="violation",
            index=models.Index(
                condition=models.Q(("assignee__isnull", False)),
                fields=["assignee", "-created_at", "-id"],
                name="violation_assignee",
            ),
        ),
    ]
