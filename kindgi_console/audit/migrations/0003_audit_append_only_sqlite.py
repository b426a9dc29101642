"""On SQLite (the embedded default) a trigger refuses UPDATE of an audit entry; see audit/sqlite.py."""

from typing import Any

from django.db import migrations

from kindgi_console.audit.sqlite import CREATE_UPDATE_TRIGGER, DROP_UPDATE_TRIGGER


def create(apps: Any, schema_editor: Any) -> None:
    if schema_editor.connection.vendor == "sqlite":
        schema_editor.execute(CREATE_UPDATE_TRIGGER, params=None)


def drop(apps: Any, schema_editor: Any) -> None:
    if schema_editor.connection.vendor == "sqlite":
        schema_editor.execute(DROP_UPDATE_TRIGGER, params=None)


class Migration(migrations.Migration):
    dependencies = [("audit", "0002_audit_append_only")]

    operations = [migrations.RunPython(create, drop)]
