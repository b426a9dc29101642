"""Mask the credentials of the URLs already in the audit log (kindgi_console.audit.redaction).

The log is append-only: a trigger refuses UPDATE on PostgreSQL (migration 0002) and on
SQLite (0003). This migration's own transaction turns the trigger off, rewrites the
entries whose changes hold a URL, and turns it on again before it commits, so no other
transaction ever sees the table without its trigger, and nothing but this migration may
edit an entry. Nothing else of an entry changes; each rewritten entry differs only where a
URL's credentials were.
"""

from typing import Any

from django.db import migrations
from django.db.models import TextField
from django.db.models.functions import Cast

from kindgi_console.audit.redaction import redacted
from kindgi_console.audit.sqlite import CREATE_UPDATE_TRIGGER, DROP_UPDATE_TRIGGER

BATCH = 500
TRIGGER_OFF = {
    "postgresql": ["ALTER TABLE audit_auditentry DISABLE TRIGGER audit_entry_append_only"],
    "sqlite": [DROP_UPDATE_TRIGGER],
}
TRIGGER_ON = {
    "postgresql": ["ALTER TABLE audit_auditentry ENABLE TRIGGER audit_entry_append_only"],
    "sqlite": [CREATE_UPDATE_TRIGGER],
}


def redact(apps: Any, schema_editor: Any) -> None:
    entry = apps.get_model("audit", "AuditEntry")
    vendor = schema_editor.connection.vendor
    # Only entries whose changes hold "://" can hold a URL (the JSON's own text, any depth).
    text = Cast("changes", output_field=TextField())
    rows = entry.objects.annotate(text=text).filter(text__contains="://").only("pk", "changes").order_by("pk")
    changed = [row for row in rows.iterator(chunk_size=BATCH) if _redact(row)]
    if not changed:
        return
    for statement in TRIGGER_OFF.get(vendor, []):
        schema_editor.execute(statement, params=None)
    entry.objects.bulk_update(changed, ["changes"], batch_size=BATCH)
    for statement in TRIGGER_ON.get(vendor, []):
        schema_editor.execute(statement, params=None)


def _redact(row: Any) -> bool:
    masked = redacted(row.changes)
    if masked == row.changes:
        return False
    row.changes = masked
    return True


class Migration(migrations.Migration):
    dependencies = [("audit", "0003_audit_append_only_sqlite")]

    operations = [migrations.RunPython(redact, migrations.RunPython.noop)]
