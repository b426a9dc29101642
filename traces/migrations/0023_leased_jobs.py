"""One leased-job primitive (kindgi_console.jobs) and one status vocabulary.

The jobs' fields come from its abstract models: a chunk ends `succeeded` (it was `done`),
every status field takes the same choices, a lease may be empty, and the outbox counts its
sends as `attempts` (it was `resent`: renamed, so the counts of batches waiting are kept).
"""

from django.apps.registry import Apps
from django.db import migrations, models
from django.db.backends.base.schema import BaseDatabaseSchemaEditor


def chunks_succeed(apps: Apps, schema_editor: BaseDatabaseSchemaEditor) -> None:
    chunks = apps.get_model("traces", "EvaluationChunk")
    chunks.objects.filter(status="done").update(status="succeeded")


def chunks_are_done(apps: Apps, schema_editor: BaseDatabaseSchemaEditor) -> None:
    chunks = apps.get_model("traces", "EvaluationChunk")
    chunks.objects.filter(status="succeeded").update(status="done")


class Migration(migrations.Migration):
    dependencies = [("traces", "0022_one_run_key_per_result")]

    operations = [
        migrations.RenameField(model_name="pendingruntimeevaluation", old_name="resent", new_name="attempts"),
        migrations.AlterField(
            model_name="pendingruntimeevaluation", name="attempts", field=models.PositiveIntegerField(default=0)
        ),
        migrations.AlterField(
            model_name="evaluationchunk",
            name="lease_until",
            field=models.DateTimeField(
                blank=True, help_text="until when its worker (or the message sent for it) is trusted", null=True
            ),
        ),
        migrations.AlterField(
            model_name="evaluationchunk",
            name="status",
            field=models.CharField(
                choices=[
                    ("queued", "Queued"),
                    ("running", "Running"),
                    ("succeeded", "Succeeded"),
                    ("failed", "Failed"),
                    ("cancelled", "Cancelled"),
                ],
                default="queued",
                max_length=20,
            ),
        ),
        migrations.AlterField(
            model_name="guardrailpreview",
            name="status",
            field=models.CharField(
                choices=[
                    ("queued", "Queued"),
                    ("running", "Running"),
                    ("succeeded", "Succeeded"),
                    ("failed", "Failed"),
                    ("cancelled", "Cancelled"),
                ],
                default="queued",
                max_length=20,
            ),
        ),
        migrations.AlterField(
            model_name="pendingruntimeevaluation",
            name="lease_until",
            field=models.DateTimeField(
                blank=True, help_text="until when its worker (or the message sent for it) is trusted", null=True
            ),
        ),
        migrations.AlterField(
            model_name="runcomparison",
            name="status",
            field=models.CharField(
                choices=[
                    ("queued", "Queued"),
                    ("running", "Running"),
                    ("succeeded", "Succeeded"),
                    ("failed", "Failed"),
                    ("cancelled", "Cancelled"),
                ],
                default="queued",
                max_length=20,
            ),
        ),
        migrations.AlterField(model_name="upload", name="attempts", field=models.PositiveIntegerField(default=0)),
        migrations.AlterField(
            model_name="upload",
            name="lease_until",
            field=models.DateTimeField(
                blank=True, help_text="until when its worker (or the message sent for it) is trusted", null=True
            ),
        ),
        migrations.AlterField(
            model_name="upload",
            name="status",
            field=models.CharField(
                choices=[
                    ("queued", "Queued"),
                    ("running", "Running"),
                    ("succeeded", "Succeeded"),
                    ("failed", "Failed"),
                    ("cancelled", "Cancelled"),
                ],
                default="queued",
                max_length=20,
            ),
        ),
        migrations.RunPython(chunks_succeed, chunks_are_done, elidable=True),
    ]
