"""Migration operations that build and drop the results table's indexes without locking its
writes: on PostgreSQL `CREATE [UNIQUE] INDEX CONCURRENTLY` and `DROP INDEX CONCURRENTLY`
(in a migration with `atomic = False`), elsewhere (SQLite) the plain operation. The state
they leave is the plain operation's: the same names and definitions, so a deployment that
applied a migration before it used them has the same schema.

A build that was interrupted (a killed `migrate`, a lost connection) leaves an INVALID
index of that name on PostgreSQL: the next `migrate` drops it and builds it again; one
left valid by a run that stopped before recording the migration is kept as it is.
"""

from __future__ import annotations

from typing import Any

from django.db import NotSupportedError, migrations
from django.db.backends.base.schema import BaseDatabaseSchemaEditor
from django.db.migrations.state import ProjectState
from django.db.models import Index, Model, UniqueConstraint


def _concurrently(schema_editor: BaseDatabaseSchemaEditor) -> bool:
    if schema_editor.connection.vendor != "postgresql":
        return False
    if schema_editor.connection.in_atomic_block:
        raise NotSupportedError("building an index CONCURRENTLY needs a migration with atomic = False")
    return True


def _needs_building(schema_editor: BaseDatabaseSchemaEditor, name: str) -> bool:
    """False when a valid index of this name stands already; an invalid one is dropped."""
    if schema_editor.collect_sql:  # sqlmigrate: show the statement
        return True
    with schema_editor.connection.cursor() as cursor:
        cursor.execute(
            "SELECT i.indisvalid FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
            "WHERE c.relname = %s AND pg_table_is_visible(c.oid)",
            [name],
        )
        found = cursor.fetchone()
    if found is not None and not found[0]:
        schema_editor.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {schema_editor.quote_name(name)}")
    return found is None or not found[0]


def _build(schema_editor: BaseDatabaseSchemaEditor, model: type[Model], key: Index | UniqueConstraint) -> None:
    """CREATE [UNIQUE] INDEX CONCURRENTLY: an index, or a UniqueConstraint that is a unique
    index (one with a condition or expressions, as every one built here)."""
    if not _needs_building(schema_editor, str(key.name)):
        return
    if isinstance(key, Index):
        schema_editor.execute(key.create_sql(model, schema_editor, concurrently=True), params=None)
        return
    assert key.condition is not None or key.expressions, "a plain unique constraint is not an index"
    sql = str(key.create_sql(model, schema_editor))
    schema_editor.execute(sql.replace("CREATE UNIQUE INDEX", "CREATE UNIQUE INDEX CONCURRENTLY", 1), params=None)


class _Concurrently:
    """Forwards and backwards: the plain operation, or on PostgreSQL the index built (in the
    state that has it, `to_state`) or dropped (named in `from_state`) concurrently."""

    builds = True  # forwards builds the index (an Add); False: forwards drops it (a Remove)
    model_name: str
    model_name_lower: str

    def key_name(self) -> str:
        raise NotImplementedError

    def database_forwards(self, app_label: str, schema_editor: Any, from_state: Any, to_state: Any) -> None:
        self._run(app_label, schema_editor, from_state, to_state, forwards=True)

    def database_backwards(self, app_label: str, schema_editor: Any, from_state: Any, to_state: Any) -> None:
        self._run(app_label, schema_editor, from_state, to_state, forwards=False)

    def _run(self, app_label: str, schema_editor: Any, from_state: Any, to_state: Any, *, forwards: bool) -> None:
        if not _concurrently(schema_editor):
            plain = super().database_forwards if forwards else super().database_backwards  # type: ignore[misc]
            plain(app_label, schema_editor, from_state, to_state)
            return
        build = self.builds == forwards
        state: ProjectState = to_state if build else from_state
        model = state.apps.get_model(app_label, self.model_name)
        if not self.allow_migrate_model(schema_editor.connection.alias, model):  # type: ignore[attr-defined]
            return
        if not build:
            schema_editor.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {schema_editor.quote_name(self.key_name())}")
            return
        model_state = state.models[app_label, self.model_name_lower]
        indexes = {index.name: index for index in model_state.options.get("indexes", [])}
        _build(
            schema_editor, model, indexes.get(self.key_name()) or model_state.get_constraint_by_name(self.key_name())
        )


class AddIndexConcurrently(_Concurrently, migrations.AddIndex):
    def key_name(self) -> str:
        return str(self.index.name)


class RemoveIndexConcurrently(_Concurrently, migrations.RemoveIndex):
    builds = False

    def key_name(self) -> str:
        return str(self.name)


class AddUniqueIndexConcurrently(_Concurrently, migrations.AddConstraint):
    """AddConstraint of a UniqueConstraint that is a unique index (a condition, expressions)."""

    def key_name(self) -> str:
        return str(self.constraint.name)


class RemoveUniqueIndexConcurrently(_Concurrently, migrations.RemoveConstraint):
    """RemoveConstraint of a UniqueConstraint that is a unique index (a condition, expressions)."""

    builds = False

    def key_name(self) -> str:
        return str(self.name)
