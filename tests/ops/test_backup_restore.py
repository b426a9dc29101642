"""docs/operations.md's dump and restore, followed on PostgreSQL: a populated database is
dumped with the real pg_dump, restored into a new database with pg_restore, checked with
`migrate --check`, and every table holds as many rows as the original."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import psycopg
import pytest
from django.db import connection

from tests.conftest import make_guardrail, make_trace
from tests.traces.workers import test_database_url as database_url_of_this_test

pytestmark = [pytest.mark.postgresql("pg_dump and pg_restore"), pytest.mark.django_db(transaction=True)]
ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent


def recipe() -> list[list[str]]:
    """The commands of the recipe's block in docs/operations.md, comments dropped."""
    text = (ROOT / "docs" / "operations.md").read_text()
    block = re.search(r"### Dump and restore\n.*?```sh\n(.*?)```", text, re.S)
    assert block, "docs/operations.md has no sh block under 'Dump and restore'"
    return [
        shlex.split(line, comments=True) for line in block.group(1).splitlines() if shlex.split(line, comments=True)
    ]


def row_counts(url: str) -> dict[str, int]:
    with psycopg.connect(url) as db:
        tables = [name for (name,) in db.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")]
        return {table: db.execute(f'SELECT count(*) FROM "{table}"').fetchone()[0] for table in tables}  # type: ignore[index]


def test_a_dump_restored_into_a_new_database_has_every_row(
    tmp_path: Path, api: Any, acme_key: str, author_key: str
) -> None:
    assert api(author_key).post("/api/v1/guardrails", make_guardrail(), format="json").status_code == 201
    traces = {"traces": [make_trace(f"run-{index}") for index in range(5)]}
    assert api(acme_key).post("/api/v1/traces", traces, format="json").status_code in (200, 201, 207)
    assert api(acme_key).post("/api/v1/evaluate", make_trace("run-verdict"), format="json").status_code == 200
    source = database_url_of_this_test()
    restored_name = f"{connection.settings_dict['NAME']}_restored"
    restored = source.rsplit("/", 1)[0] + "/" + restored_name
    host = connection.settings_dict["HOST"] or "127.0.0.1"
    dump, create, restore, check = recipe()
    env = {**os.environ, "DATABASE_URL": source}
    env.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
    subprocess.run(["dropdb", "--if-exists", "-h", host, "-U", "postgres", restored_name], check=True)

    try:
        assert dump[:1] == ["pg_dump"] and dump[-1] == "$DATABASE_URL"
        run([*dump[:-1], source], tmp_path, env)
        assert create[:1] == ["createdb"]
        run(["createdb", "-h", host, "-U", "postgres", restored_name], tmp_path, env)
        assert restore[:1] == ["pg_restore"]
        run([restored if word.startswith("postgres://") else word for word in restore], tmp_path, env)
        assert check[0].startswith("DATABASE_URL=") and check[1:] == [
            ".venv/bin/python",
            "manage.py",
            "migrate",
            "--check",
        ]
        run([str(BIN / "python"), "manage.py", "migrate", "--check"], ROOT, {**env, "DATABASE_URL": restored})

        original, copy = row_counts(source), row_counts(restored)
        assert original["traces_runtrace"] == 6
        assert original["traces_evaluationresult"] >= 6
        assert copy == original
    finally:
        subprocess.run(["dropdb", "--if-exists", "-h", host, "-U", "postgres", restored_name], check=True)


def run(argv: list[str], cwd: Path, env: dict[str, str]) -> None:
    result = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, f"{shlex.join(argv)} failed:\n{result.stdout}\n{result.stderr}"
