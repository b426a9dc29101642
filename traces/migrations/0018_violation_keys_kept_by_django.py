import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("guardrails", "0005_guardrail_shadow"),
        ("tenancy", "0004_tenant_reviewer_judge_limit"),
        ("traces", "0017_run_comparisons"),
    ]

    operations = [
        migrations.RemoveIndex(model_name="evaluationresult", name="result_evaluation_status"),
        migrations.AlterField(
            model_name="violation",
            name="evaluation",
            field=models.ForeignKey(
                blank=True,
                db_constraint=False,
                null=True,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="violations",
                to="traces.evaluation",
            ),
        ),
        migrations.AlterField(
            model_name="violation",
            name="guardrail",
            field=models.ForeignKey(
                db_constraint=False,
                db_index=False,
                on_delete=django.db.models.deletion.PROTECT,
                related_name="violations",
                to="guardrails.guardrail",
            ),
        ),
        migrations.AlterField(
            model_name="violation",
            name="result",
            field=models.OneToOneField(
                db_constraint=False,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="violation",
                to="traces.evaluationresult",
            ),
        ),
        migrations.AlterField(
            model_name="violation",
            name="revision",
            field=models.ForeignKey(
                db_constraint=False,
                db_index=False,
                on_delete=django.db.models.deletion.PROTECT,
                related_name="+",
                to="guardrails.guardrailrevision",
            ),
        ),
        migrations.AlterField(
            model_name="violation",
            name="tenant",
            field=models.ForeignKey(
                db_constraint=False,
                db_index=False,
                on_delete=django.db.models.deletion.PROTECT,
                related_name="violations",
                to="tenancy.tenant",
            ),
        ),
        migrations.AlterField(
            model_name="violation",
            name="trace",
            field=models.ForeignKey(
                db_constraint=False,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="violations",
                to="traces.runtrace",
            ),
        ),
    ]
