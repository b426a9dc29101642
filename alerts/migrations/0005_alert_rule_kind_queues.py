"""The queue rules: a review queue's open violations over a threshold (`queue_size`), or its
oldest unclaimed one older than a limit (`queue_age`). Only the field's choices change."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("alerts", "0004_leased_jobs")]

    operations = [
        migrations.AlterField(
            model_name="alertrule",
            name="kind",
            field=models.CharField(
                choices=[
                    ("violations", "Violations"),
                    ("spend", "Spend"),
                    ("run_failed", "Run Failed"),
                    ("upload_failed", "Upload Failed"),
                    ("precision", "Precision"),
                    ("queue_size", "Queue size"),
                    ("queue_age", "Queue age"),
                ],
                max_length=20,
            ),
        )
    ]
