"""One violation per finding: (trace, guardrail revision) becomes the violations' unique key.

Runs used to store a violation for every `fail` they found, so a finding found by several
runs (or by a run and the runtime) had several violations, each reviewed or not on its own.
The duplicates are merged first: of each (trace, revision) the violation kept is the
reviewed one (out of `open`, else the one reviewed last, else the first found), the review
history of the others moves to it, and the others are deleted. The results that found them
stay: a result is linked to its violation by its trace and revision. The daily roll-up is
then counted again from the violations kept (a recount, as in 0016), so that it holds
exactly what they say.

On PostgreSQL the violations' table is locked against writes (SHARE ROW EXCLUSIVE) for the
transaction: no run or runtime verdict stores a duplicate between the merge and the key,
and none moves a count of the roll-up while it is recounted; they wait, and then write
ON CONFLICT DO NOTHING against the key. Reviews pending deferred foreign-key checks are
checked at once, as ALTER TABLE refuses a table with pending trigger events.
"""

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from django.apps.registry import Apps
from django.db import migrations, models
from django.db.backends.base.schema import BaseDatabaseSchemaEditor

REVIEWED = ("acknowledged", "resolved", "false-positive")
BATCH = 500

DUPLICATES = """
SELECT v.id, v.trace_id, v.revision_id, v.state, v.reviewed_at
FROM traces_violation v JOIN (
  SELECT trace_id, revision_id FROM traces_violation GROUP BY trace_id, revision_id HAVING count(*) > 1
) d ON d.trace_id = v.trace_id AND d.revision_id = v.revision_id
ORDER BY v.trace_id, v.revision_id, v.id
"""


def kept_first(members: list[Sequence[Any]]) -> list[Sequence[Any]]:
    """A finding's violations in the order they are kept: reviewed, reviewed last, found first
    (stable sorts, the last one deciding first)."""
    ordered = sorted(members, key=lambda row: row[0])
    ordered.sort(key=lambda row: (row[4] is not None, row[4] or 0), reverse=True)
    ordered.sort(key=lambda row: row[3] not in REVIEWED)
    return ordered


def merges(rows: list[Sequence[Any]]) -> list[tuple[int, int]]:
    """(duplicate, kept) of every violation to merge into the one of its finding kept."""
    groups: dict[tuple[int, int], list[Sequence[Any]]] = defaultdict(list)
    for row in rows:
        groups[(row[1], row[2])].append(row)
    moved = []
    for members in groups.values():
        kept, *others = kept_first(members)
        moved += [(other[0], kept[0]) for other in others]
    return moved


def merge_duplicates(apps: Apps, schema_editor: BaseDatabaseSchemaEditor) -> None:
    connection = schema_editor.connection
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute("LOCK TABLE traces_violation IN SHARE ROW EXCLUSIVE MODE")
        cursor.execute(DUPLICATES)
        moved = merges(cursor.fetchall())
        cursor.executemany(
            "UPDATE traces_violationreview SET violation_id = %s WHERE violation_id = %s",
            [(kept, duplicate) for duplicate, kept in moved],
        )
        duplicates = [duplicate for duplicate, _ in moved]
        for start in range(0, len(duplicates), BATCH):
            keys = duplicates[start : start + BATCH]
            cursor.execute(f"DELETE FROM traces_violation WHERE id IN ({', '.join(['%s'] * len(keys))})", keys)  # noqa: S608
    recount_violation_days(apps, schema_editor)


def recount_violation_days(apps: Apps, schema_editor: BaseDatabaseSchemaEditor) -> None:
    """The roll-up counted again from the violations (their day, revision and review state)."""
    from django.db.models import Count, Q
    from django.db.models.functions import TruncDate

    alias = schema_editor.connection.alias
    violation_model = apps.get_model("traces", "Violation")
    day_model = apps.get_model("traces", "ViolationDay")
    day_model.objects.using(alias).all().delete()
    rows = (
        violation_model.objects.using(alias)
        .order_by()
        .annotate(g_day=TruncDate("created_at"))
        .values_list("tenant_id", "guardrail_id", "revision_id", "severity", "g_day")
        .annotate(
            n=Count("pk"),
            reviewed=Count("pk", filter=Q(state__in=REVIEWED)),
            false_positives=Count("pk", filter=Q(state="false-positive")),
        )
    )
    day_model.objects.using(alias).bulk_create(
        [
            day_model(
                tenant_id=tenant,
                guardrail_id=guardrail,
                revision_id=revision,
                severity=severity,
                day=day,
                count=n,
                reviewed=reviewed,
                false_positives=wrong,
            )
            for tenant, guardrail, revision, severity, day, n, reviewed, wrong in rows
        ],
        batch_size=1000,
    )
    if schema_editor.connection.vendor == "postgresql":
        with schema_editor.connection.cursor() as cursor:
            cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")


class Migration(migrations.Migration):
    dependencies = [("traces", "0025_results_key_per_stage")]

    operations = [
        migrations.RunPython(merge_duplicates, migrations.RunPython.noop),
        migrations.AddConstraint(
            model_name="violation",
            constraint=models.UniqueConstraint(fields=("trace", "revision"), name="violation_per_trace_revision"),
        ),
        migrations.AlterField(
            model_name="violation",
            name="trace",
            field=models.ForeignKey(
                db_constraint=False,
                db_index=False,
                on_delete=models.deletion.CASCADE,
                related_name="violations",
                to="traces.runtrace",
            ),
        ),
    ]
