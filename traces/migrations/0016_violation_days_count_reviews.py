"""The violations' daily roll-up also counts per revision what reviewers said: reviewed and
false positives, so that a guardrail's quality reads it instead of every violation.

The roll-up is emptied, given its new columns and key, then counted again from the
violations (their revision and review state): a recount, not a conversion, so that it
holds exactly what the violations say. The rows are written last: PostgreSQL refuses to
alter a table that has rows with pending constraint checks in the same transaction.

The index on the new revision column is built after the last operation, when the schema
editor runs the statements it deferred; the rows written just before it hold deferred
foreign-key checks, so the data step checks them at once (SET CONSTRAINTS ALL IMMEDIATE):
without it a database that holds violations stops here with "cannot CREATE INDEX
traces_violationday because it has pending trigger events". The schema it ends with is
the same, so a database that applied this migration before (empty, or made after it) is
identical to one that applies it now.
"""

import django.db.models.deletion
from django.apps.registry import Apps
from django.db import migrations, models
from django.db.backends.base.schema import BaseDatabaseSchemaEditor
from django.db.models import Count, Q
from django.db.models.functions import TruncDate

REVIEWED = ("acknowledged", "resolved", "false-positive")


def empty_violation_days(apps: Apps, schema_editor: BaseDatabaseSchemaEditor) -> None:
    apps.get_model("traces", "ViolationDay").objects.using(schema_editor.connection.alias).delete()


def count_violations_and_reviews(apps: Apps, schema_editor: BaseDatabaseSchemaEditor) -> None:
    """The violations stored, counted per tenant, guardrail, revision, severity and day."""
    alias = schema_editor.connection.alias
    violation_model = apps.get_model("traces", "Violation")
    day_model = apps.get_model("traces", "ViolationDay")
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
    dependencies = [("guardrails", "0001_initial"), ("traces", "0015_calibration")]

    operations = [
        migrations.RunPython(empty_violation_days, migrations.RunPython.noop),
        migrations.RemoveConstraint(model_name="violationday", name="violation_day_unique"),
        migrations.AddField(
            model_name="violationday",
            name="revision",
            field=models.ForeignKey(
                default=0,
                on_delete=django.db.models.deletion.PROTECT,
                related_name="+",
                to="guardrails.guardrailrevision",
            ),
            preserve_default=False,
        ),
        migrations.AddField(model_name="violationday", name="reviewed", field=models.BigIntegerField(default=0)),
        migrations.AddField(model_name="violationday", name="false_positives", field=models.BigIntegerField(default=0)),
        migrations.AddConstraint(
            model_name="violationday",
            constraint=models.UniqueConstraint(
                fields=("tenant", "guardrail", "revision", "severity", "day"), name="violation_day_unique"
            ),
        ),
        migrations.RunPython(count_violations_and_reviews, empty_violation_days),
    ]
