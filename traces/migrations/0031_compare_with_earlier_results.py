"""Each guardrail of a run compared with its own latest earlier results: the lists keyed by
revision, a third list (still failing), the earlier result's run and revision on each listed
trace, a run compared with earlier results rather than with one other run (`other` empty),
and the position a computation reached, which the next task continues from.
"""

import django.db.models.deletion
from django.apps.registry import Apps
from django.db import migrations, models
from django.db.backends.base.schema import BaseDatabaseSchemaEditor


def forget_comparisons(apps: Apps, schema_editor: BaseDatabaseSchemaEditor) -> None:
    """Kept comparisons are figures of the results in the shape they had: they are computed
    again, in the new one, when next asked for (each table in one statement)."""
    for name in ("ComparisonChange", "RunComparison"):
        rows = apps.get_model("traces", name).objects.all()
        rows._raw_delete(rows.db)


class Migration(migrations.Migration):
    dependencies = [("guardrails", "0008_guardrail_enforced_revision"), ("traces", "0030_violation_queues_and_claims")]

    operations = [
        migrations.RunPython(forget_comparisons, migrations.RunPython.noop),
        migrations.RemoveIndex(model_name="comparisonchange", name="comparison_change_key"),
        migrations.AddField(
            model_name="comparisonchange",
            name="earlier_revision",
            field=models.PositiveIntegerField(blank=True, help_text="the earlier result's revision", null=True),
        ),
        migrations.AddField(
            model_name="comparisonchange",
            name="earlier_run",
            field=models.BigIntegerField(
                blank=True, help_text="the earlier result's run; none: the runtime", null=True
            ),
        ),
        migrations.AddField(
            model_name="comparisonchange",
            name="revision",
            field=models.ForeignKey(
                db_constraint=False,
                db_index=False,
                default=0,
                on_delete=django.db.models.deletion.PROTECT,
                related_name="+",
                to="guardrails.guardrailrevision",
            ),
            preserve_default=False,
        ),
        migrations.AlterField(
            model_name="comparisonchange",
            name="kind",
            field=models.CharField(
                choices=[
                    ("newly-failing", "Newly Failing"),
                    ("no-longer-failing", "No Longer Failing"),
                    ("still-failing", "Still Failing"),
                ],
                max_length=20,
            ),
        ),
        migrations.AlterField(
            model_name="comparisonchange",
            name="reason",
            field=models.TextField(blank=True, help_text="the failure's reason: the run's, or the earlier one's"),
        ),
        migrations.AlterField(
            model_name="runcomparison",
            name="guardrails",
            field=models.JSONField(
                default=list, help_text="per revision of the run: what was compared, what changed, what was not and why"
            ),
        ),
        migrations.AlterField(
            model_name="runcomparison",
            name="other",
            field=models.ForeignKey(
                blank=True,
                help_text="the run compared with; none: each guardrail's latest earlier results",
                null=True,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="+",
                to="traces.evaluation",
            ),
        ),
        migrations.AddField(
            model_name="runcomparison",
            name="position",
            field=models.JSONField(
                blank=True, default=dict, help_text="where the computation stopped: the next task continues from it"
            ),
        ),
        migrations.AlterField(
            model_name="runcomparison",
            name="total",
            field=models.PositiveIntegerField(default=0, help_text="results to compare"),
        ),
        migrations.AddIndex(
            model_name="comparisonchange",
            index=models.Index(fields=["comparison", "revision", "kind", "id"], name="comparison_change_list"),
        ),
        migrations.AddConstraint(
            model_name="runcomparison",
            constraint=models.UniqueConstraint(
                condition=models.Q(("other__isnull", True)), fields=("evaluation",), name="comparison_with_earlier_once"
            ),
        ),
    ]
