"""Shadow for every guardrail: the revision still enforced beside a shadow one.

Existing shadow state carries over as it was: a guardrail in shadow (an llm-judge, so far)
keeps its current revision in shadow with nothing enforced beside it (`enforced_revision`
empty), and an enforced one stays enforced.
"""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("guardrails", "0007_guardrail_on_error")]

    operations = [
        migrations.AddField(
            model_name="guardrail",
            name="enforced_revision",
            field=models.PositiveIntegerField(
                blank=True,
                help_text="in shadow, the revision still enforced beside the shadow one until it is promoted (none: none)",
                null=True,
            ),
        ),
        migrations.AlterField(
            model_name="guardrail",
            name="shadow",
            field=models.BooleanField(
                default=False,
                help_text="its current revision is evaluated and recorded, never halting and never a violation",
            ),
        ),
        migrations.AlterField(
            model_name="guardrail",
            name="shadow_sample_rate",
            field=models.FloatField(
                blank=True, help_text="in shadow, the share of matching traces evaluated (none: every one)", null=True
            ),
        ),
    ]
