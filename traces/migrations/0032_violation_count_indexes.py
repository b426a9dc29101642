"""The open violations of a tenant by severity, and a queue's open unclaimed ones, in indexes
of their own: the overview counts them up to a cap (`kindgi_console.paging.bounded_count`) at
the cost of the cap, whatever the table's size. Built CONCURRENTLY on PostgreSQL: ingestion
and reviews go on while they build."""

from django.db import migrations, models

from traces.migration_operations import AddIndexConcurrently


class Migration(migrations.Migration):
    dependencies = [("traces", "0031_compare_with_earlier_results")]

    atomic = False

    operations = [
        AddIndexConcurrently(
            model_name="violation",
            index=models.Index(
                condition=models.Q(state="open"), fields=["tenant", "severity"], name="violation_open_severity"
            ),
        ),
        AddIndexConcurrently(
            model_name="violation",
            index=models.Index(
                condition=models.Q(assignee__isnull=True, queue__isnull=False, state="open"),
                fields=["tenant", "queue"],
                name="violation_queue_unclaimed",
            ),
        ),
    ]
