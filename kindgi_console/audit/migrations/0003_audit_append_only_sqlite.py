"""The audit log is append-only on SQLite too (the embedded default): triggers refuse UPDATE and DELETE.

SQLite has no session settings, so retention (kindgi_console.audit.retention) drops the DELETE
trigger, deletes and creates it again inside one transaction: SQLite's DDL is transactional, so
no other connection ever sees the table without it.
"""

from typing import Any

from django.db import migrations

from kindgi_console.audit.sqlite import CREATE_DELETE_TRIGGER, CREATE_UPDATE_TRIGGER, DROP_TRIGGERS


def create(apps: Any, schema_editor: Any) -> None:
    if schema_editor.connection.vendor == "sqlite":
        schema_editor.execute(CREATE_UPDATE_TRIGGER, params=None)
        schema_editor.execute(CREATE_DELETE_TRIGGER, params=None)


def drop(apps: Any, schema_editor: Any) -> None:
    if schema_editor.connection.vendor == "sqlite":
        for statement in DROP_TRIGGERS:
            schema_editor.execute(statement, params=None)


class Migration(migrations.Migration):
    dependencies = [("audit", "0002_audit_append_only")]

    operations = [migrations.RunPython(create, drop)]
