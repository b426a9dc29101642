"""Migrations traces 0019 to 0022 and 0025 build the results' and violations' indexes CONCURRENTLY
on PostgreSQL (no write lock on a large table) and plainly on SQLite; either way they apply,
unapply and apply again to the same schema, rewriting no row of the results table (0022's
change of the status collation included), and an interrupted build is finished by the next
`migrate` (traces/migration_operations.py)."""

from __future__ import annotations

import io

import pytest
from django.core.management import call_command
from django.db import connection

pytestmark = pytest.mark.django_db(transaction=True)

TABLE = "traces_evaluationresult"
BEFORE = "0018_violation_keys_kept_by_django"
#: Before the results' key gained the stage of a turn (0025).
BEFORE_STAGES = "0024_result_stage_columns"
KEY = "result_per_trace_run_stage"


def schema() -> dict[str, str]:
    """The results table's indexes and constraints, by name, as the database defines them."""
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute("SELECT indexname, indexdef FROM pg_indexes WHERE tablename = %s", [TABLE])
            rows = cursor.fetchall()
            cursor.execute(
                "SELECT conname, pg_get_constraintdef(oid) FROM pg_constraint WHERE conrelid = %s::regclass", [TABLE]
            )
            return dict(rows + cursor.fetchall())
        cursor.execute("SELECT name, sql FROM sqlite_master WHERE tbl_name = %s", [TABLE])
        return dict(cursor.fetchall())


def migrate(*target: str) -> None:
    call_command("migrate", *target, verbosity=0)


def table_file() -> int | None:
    """The results table's storage on PostgreSQL: a rewrite of its rows gives a new one."""
    if connection.vendor != "postgresql":
        return None
    with connection.cursor() as cursor:
        cursor.execute("SELECT relfilenode FROM pg_class WHERE oid = %s::regclass", [TABLE])
        return int(cursor.fetchone()[0])


def test_the_index_migrations_apply_unapply_and_apply_again_to_the_same_schema() -> None:
    migrated, stored = schema(), table_file()
    assert KEY in migrated and "result_run_key" in migrated
    try:
        migrate("traces", BEFORE)
        before = schema()
        assert "result_per_run" in before and KEY not in before
        assert "result_run_key" not in before
    finally:
        migrate()
    assert schema() == migrated
    assert table_file() == stored


@pytest.mark.postgresql("CONCURRENTLY is PostgreSQL's")
def test_on_postgresql_the_indexes_are_built_and_dropped_concurrently() -> None:
    # 0021 also drops the violations' old reviewer index, which is quick, plainly.
    for name, kinds in (
        ("0019", ("CREATE", "DROP")),
        ("0020", ("CREATE", "DROP")),
        ("0021", ("CREATE",)),
        ("0022", ("CREATE", "DROP")),
        ("0025", ("CREATE", "DROP")),
    ):
        out = io.StringIO()
        call_command("sqlmigrate", "traces", name, stdout=out)
        statements = [line for line in out.getvalue().splitlines() if line.startswith(kinds)]
        assert statements and all(" CONCURRENTLY " in line for line in statements), statements


@pytest.mark.postgresql("an INVALID index is PostgreSQL's")
@pytest.mark.parametrize("valid", [False, True])
def test_an_interrupted_build_is_finished_by_the_next_migrate(valid: bool) -> None:
    """A killed `migrate` leaves the new key INVALID (or built, the migration not recorded):
    the next one builds it again (or keeps it) and records the migration."""
    migrated = schema()
    try:
        migrate("traces", BEFORE_STAGES)
        with connection.cursor() as cursor:
            cursor.execute(migrated[KEY])
            if not valid:
                cursor.execute(f"UPDATE pg_index SET indisvalid = false WHERE indexrelid = '{KEY}'::regclass")
    finally:
        migrate()
    assert schema() == migrated
    with connection.cursor() as cursor:
        cursor.execute("SELECT bool_and(indisvalid) FROM pg_index WHERE indrelid = %s::regclass", [TABLE])
        assert cursor.fetchone() == (True,)
