"""Number the deliveries of each rule to each channel, in the order they were made."""

from typing import Any

from django.db import migrations, models


def number_existing(apps: Any, schema_editor: Any) -> None:
    Delivery = apps.get_model("alerts", "Delivery")
    last: dict[tuple[int, int], int] = {}
    changed = []
    rows = Delivery.objects.order_by("pk").values_list("pk", "firing__rule_id", "channel_id")
    for pk, rule_id, channel_id in rows.iterator(chunk_size=2000):
        last[rule_id, channel_id] = last.get((rule_id, channel_id), 0) + 1
        changed.append(Delivery(pk=pk, sequence=last[rule_id, channel_id]))
        if len(changed) >= 2000:
            Delivery.objects.bulk_update(changed, ["sequence"])
            changed = []
    Delivery.objects.bulk_update(changed, ["sequence"])


class Migration(migrations.Migration):
    dependencies = [("alerts", "0002_alert_rule_kind_precision")]

    operations = [
        migrations.AddField(model_name="delivery", name="sequence", field=models.PositiveIntegerField(default=0)),
        migrations.AddIndex(
            model_name="delivery",
            index=models.Index(fields=["channel", "state", "sequence"], name="alert_delivery_order"),
        ),
        migrations.RunPython(number_existing, migrations.RunPython.noop, elidable=True),
    ]
