"""Calibration labels per person: several reviewers label one sample, each once per trace.

The labels stored so far (one per item, on the item) are copied as their labeller's; the
item keeps its label, the first one, which the guardrail is measured against.
"""

import django.db.models.deletion
import django.utils.timezone
from django.apps.registry import Apps
from django.db import migrations, models
from django.db.backends.base.schema import BaseDatabaseSchemaEditor


def copy_item_labels(apps: Apps, schema_editor: BaseDatabaseSchemaEditor) -> None:
    """Each labelled item's label becomes its labeller's (a sample had one labeller per item)."""
    alias = schema_editor.connection.alias
    item_model = apps.get_model("traces", "CalibrationItem")
    label_model = apps.get_model("traces", "CalibrationLabel")
    labelled = (
        item_model.objects.using(alias)
        .exclude(label="")
        .select_related("sample")
        .order_by("pk")
        .iterator(chunk_size=1000)
    )
    label_model.objects.using(alias).bulk_create(
        [
            label_model(
                tenant_id=item.tenant_id,
                item_id=item.pk,
                labeller=item.labelled_by_label or "unknown",
                label=item.label,
                labelled_at=item.labelled_at or item.sample.created_at,
            )
            for item in labelled
        ],
        batch_size=1000,
    )


class Migration(migrations.Migration):
    dependencies = [("tenancy", "0005_apikey_runtime_rate"), ("traces", "0027_calibration_strata")]

    operations = [
        migrations.CreateModel(
            name="CalibrationLabel",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("labeller", models.CharField(max_length=200)),
                ("label", models.CharField(choices=[("pass", "Pass"), ("fail", "Fail")], max_length=10)),
                ("labelled_at", models.DateTimeField(default=django.utils.timezone.now)),
                (
                    "item",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE, related_name="labels", to="traces.calibrationitem"
                    ),
                ),
                (
                    "tenant",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.PROTECT, related_name="+", to="tenancy.tenant"
                    ),
                ),
            ],
            options={
                "constraints": [models.UniqueConstraint(fields=("item", "labeller"), name="calibration_label_once")]
            },
        ),
        migrations.RunPython(copy_item_labels, migrations.RunPython.noop),
    ]
