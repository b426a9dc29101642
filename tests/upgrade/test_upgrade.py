"""Upgrades: a database made by each released console, with its data, migrates to today's code.

Each file under tests/upgrade/releases/ was made by a released `main` head's own code, in its
own environment, by tests/upgrade/make_release_database.sh: its migrations applied to an empty
database and its demo loaded (two tenants, guardrails, traces, results, violations with reviews,
the judge ledger, evaluation runs). Each test restores one, runs today's `manage.py migrate` on
it in a process of its own, and then checks:
- nothing is lost: the traces, violations by review state, reviews, runs with their progress, the
  judge ledger's calls and cost, and the guardrails that the REST API serves (tests/upgrade/
  read_back.py, in a process of its own) equal what the release stored;
- a finding (trace, revision) that the release stored several violations of (its runs did, and
  the test adds one more per tenant: a reviewed finding found again, open) has one, the
  reviewed one (the one reviewed last, else the first found), with every review of the finding;
- the violations' daily roll-up equals the violations it counts;
- each labelled calibration item's label is its labeller's;
- each violation of an escalate revision is in the review queue its `escalateTo` names, and
  no other is in a queue (0030);
- the schema it ends with is exactly that of a database migrated from empty (the test database).

Releases whose migrations are those of an earlier one made no schema change: `migrate` applies
today's migrations after the same last one, so the earlier release's database covers them
(RELEASES names which).
"""

from __future__ import annotations

import functools
import gzip
import json
import os
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import psycopg.conninfo
import pytest
from django.db import connection

ROOT = Path(__file__).resolve().parents[2]
RELEASES_DIR = Path(__file__).parent / "releases"

# Every released `main` head, oldest first, with the release whose database stands for it
# (itself, or the earlier release whose migrations it shares).
RELEASES = {
    "54a18fe": "54a18fe",  # the first console release
    "13bfaa8": "13bfaa8",
    "72be6e4": "72be6e4",
    "ebe1093": "ebe1093",
    "afda8a2": "ebe1093",
    "7fc9a11": "ebe1093",
    "48c9d63": "ebe1093",
}
DATABASES = sorted(set(RELEASES.values()), key=list(RELEASES).index)

# The violation each finding (trace, revision) keeps: the reviewed one, the one reviewed last,
# the first found (0026_one_violation_per_finding merges the others into it).
KEPT = (
    "SELECT * FROM (SELECT k.*, row_number() OVER (PARTITION BY trace_id, revision_id ORDER BY "
    "CASE WHEN state <> 'open' THEN 0 ELSE 1 END, CASE WHEN reviewed_at IS NULL THEN 1 ELSE 0 END, "
    "reviewed_at DESC, id) AS rank FROM traces_violation k) ranked WHERE rank = 1"
)
# The figures read straight from the release's tables, per tenant, in the API's terms.
BEFORE = {
    "traces": "SELECT t.slug, count(*) FROM traces_runtrace r JOIN tenancy_tenant t ON t.id = r.tenant_id GROUP BY 1",
    "violations": "WITH v AS (" + KEPT + ") SELECT t.slug, v.state, count(*) FROM v "
    "JOIN tenancy_tenant t ON t.id = v.tenant_id GROUP BY 1, 2",
    "runs": "SELECT t.slug, e.id, e.status, e.done, e.total FROM traces_evaluation e "
    "JOIN tenancy_tenant t ON t.id = e.tenant_id",
    "reviews": "WITH v AS (" + KEPT + ") SELECT t.slug, v.id, v.state, "
    "(SELECT count(*) FROM traces_violationreview r JOIN traces_violation o ON o.id = r.violation_id "
    "WHERE o.trace_id = v.trace_id AND o.revision_id = v.revision_id) "
    "FROM v JOIN tenancy_tenant t ON t.id = v.tenant_id WHERE v.state <> 'open'",
    "ledger": "SELECT t.slug, count(*), sum(l.cost_usd) FROM traces_judgeledgerentry l "
    "JOIN tenancy_tenant t ON t.id = l.tenant_id GROUP BY 1",
    "guardrails": "SELECT guardrail_id FROM guardrails_guardrail WHERE deleted_at IS NULL",
    # Releases from before shadow have no such column: nothing of theirs is in shadow.
    "shadow": "SELECT guardrail_id FROM guardrails_guardrail WHERE deleted_at IS NULL AND shadow",
}
FINDINGS = (
    "SELECT (SELECT count(*) FROM traces_violationreview), "
    "(SELECT count(*) FROM (SELECT 1 FROM traces_violation GROUP BY trace_id, revision_id HAVING count(*) > 1) d)"
)
ROLLUP = (
    "SELECT (SELECT count(*) FROM traces_violation), (SELECT coalesce(sum(count), 0) FROM traces_violationday), "
    "(SELECT count(*) FROM traces_violation WHERE state <> 'open'), "
    "(SELECT coalesce(sum(reviewed), 0) FROM traces_violationday)"
)


def release_file(release: str, backend: str) -> Path:
    suffix = "postgresql.sql.gz" if backend == "postgresql" else "sqlite3.sql.gz"
    return RELEASES_DIR / f"{release}.{suffix}"


class Database:
    """A database restored from a release's file, on PostgreSQL or in an SQLite file."""

    def __init__(self, backend: str, release: str, scratch: Path) -> None:
        self.backend = backend
        if backend == "postgresql":
            settings = connection.settings_dict
            self.server: dict[str, str] = {
                "host": settings["HOST"] or "127.0.0.1",
                "port": str(settings["PORT"] or 5432),
                "user": settings["USER"] or "postgres",
            }
            self.name = f"upgrade_{release}_{os.getpid()}"
            self._admin(f'DROP DATABASE IF EXISTS "{self.name}"', f'CREATE DATABASE "{self.name}"')
            with gzip.open(release_file(release, backend), "rb") as dump:
                server = ["-h", self.server["host"], "-p", self.server["port"], "-U", self.server["user"]]
                subprocess.run(
                    ["psql", "-q", "-v", "ON_ERROR_STOP=1", *server, "-d", self.name],
                    input=dump.read(),
                    check=True,
                    capture_output=True,
                )
            password = settings["PASSWORD"] or ""
            auth = f"{self.server['user']}:{password}" if password else self.server["user"]
            self.url = f"postgres://{auth}@{self.server['host']}:{self.server['port']}/{self.name}"
        else:
            self.path = scratch / f"{release}.sqlite3"
            with gzip.open(release_file(release, backend), "rt", encoding="utf-8") as dump, self._sqlite() as db:
                db.executescript(dump.read())
            self.url = f"sqlite:///{self.path}"

    def _admin(self, *statements: str) -> None:
        with psycopg.connect(self._conninfo("postgres"), autocommit=True) as admin:
            for statement in statements:
                admin.execute(statement)

    def _conninfo(self, name: str) -> str:
        return psycopg.conninfo.make_conninfo(dbname=name, **self.server)

    def _sqlite(self) -> sqlite3.Connection:
        return sqlite3.connect(self.path, isolation_level=None)

    def rows(self, sql: str) -> list[tuple[Any, ...]]:
        if self.backend == "postgresql":
            with psycopg.connect(self._conninfo(self.name)) as server:
                return [tuple(row) for row in server.execute(sql).fetchall()]
        file = self._sqlite()
        try:
            return file.execute(sql).fetchall()
        finally:
            file.close()

    def execute(self, sql: str) -> None:
        if self.backend == "postgresql":
            with psycopg.connect(self._conninfo(self.name)) as server:
                server.execute(sql)
            return
        file = self._sqlite()
        try:
            file.execute(sql)
        finally:
            file.close()

    def drop(self) -> None:
        if self.backend == "postgresql":
            self._admin(f'DROP DATABASE IF EXISTS "{self.name}" WITH (FORCE)')


def console(database: Database, scratch: Path, *argv: str) -> str:
    """Today's console, in a process of its own, on the restored database."""
    env = {
        **os.environ,
        "DATABASE_URL": database.url,
        "KINDGI_VAR_DIR": str(scratch / "var"),
        "PYTHONPATH": str(ROOT),
        "DJANGO_SETTINGS_MODULE": "kindgi_console.settings",
    }
    done = subprocess.run([sys.executable, *argv], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, f"{' '.join(argv)} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done.stdout


def add_found_again(database: Database) -> None:
    """Per tenant, the lowest reviewed violation of a finding stored once is found again by
    a later run, as the releases stored it: an open copy, with a result of its own."""
    columns = (
        [row[0] for row in database.rows("SELECT name FROM pragma_table_info('traces_violation')")]
        if (database.backend == "sqlite")
        else [
            row[0]
            for row in database.rows(
                "SELECT column_name FROM information_schema.columns WHERE table_name = 'traces_violation'"
            )
        ]
    )
    fresh = {
        "state": "'open'",
        "reviewed_at": "NULL",
        "reviewed_by_id": "NULL",
        "reviewed_by_label": "''",
        "review_note": "''",
        "result_id": "(SELECT max(r.id) FROM traces_evaluationresult r WHERE NOT EXISTS "
        "(SELECT 1 FROM traces_violation u WHERE u.result_id = r.id))",
    }
    copied = [column for column in columns if column != "id"]
    for (pk,) in database.rows(
        "SELECT min(v.id) FROM traces_violation v WHERE v.state <> 'open' AND NOT EXISTS (SELECT 1 FROM "
        "traces_violation o WHERE o.trace_id = v.trace_id AND o.revision_id = v.revision_id AND o.id <> v.id) "
        "GROUP BY v.tenant_id"
    ):
        database.execute(
            f"INSERT INTO traces_violation ({', '.join(copied)}) "
            f"SELECT {', '.join(fresh.get(column, column) for column in copied)} FROM traces_violation WHERE id = {pk}"
        )


# Each violation's queue beside the document of the revision that found it.
QUEUES = (
    "SELECT v.queue, r.document FROM traces_violation v JOIN guardrails_guardrailrevision r ON r.id = v.revision_id"
)


def queues_match_revisions(database: Database) -> int:
    """How many violations are in a queue; each one's queue is its revision's (`escalation_queue`)."""
    from traces.models import escalation_queue

    queued = 0
    for queue, document in database.rows(QUEUES):
        parsed = json.loads(document) if isinstance(document, str) else document
        assert queue == escalation_queue(parsed)
        queued += queue is not None
    return queued


def labelled_items(database: Database) -> int:
    """The release's labelled calibration items (none before calibration existed)."""
    try:
        return int(database.rows("SELECT count(*) FROM traces_calibrationitem WHERE label <> ''")[0][0])
    except (psycopg.Error, sqlite3.Error):
        return 0


# Each labelled item's label, copied as its labeller's by 0028_calibration_labels_per_person.
LABELS_AFTER = (
    "SELECT count(*) FROM traces_calibrationlabel l JOIN traces_calibrationitem i ON i.id = l.item_id "
    "WHERE l.label = i.label AND l.tenant_id = i.tenant_id"
)


def figures_before(database: Database) -> dict[str, Any]:
    """What the release stored, per tenant, in the shape read_back.py prints."""
    tenants: dict[str, dict[str, Any]] = {}

    def tenant(slug: str) -> dict[str, Any]:
        return tenants.setdefault(slug, {"traces": 0, "violations": {}, "runs": [], "reviewed": None, "ledger": None})

    for slug, n in database.rows(BEFORE["traces"]):
        tenant(slug)["traces"] = n
    for slug, state, n in database.rows(BEFORE["violations"]):
        tenant(slug)["violations"][state] = n
    for slug, pk, status, done, total in database.rows(BEFORE["runs"]):
        tenant(slug)["runs"].append([pk, status, done, total])
    for slug, pk, state, reviews in sorted(database.rows(BEFORE["reviews"]), key=lambda row: row[1], reverse=True):
        tenant(slug)["reviewed"] = [pk, state, reviews]  # the lowest id of each tenant's, last
    for slug, calls, cost in database.rows(BEFORE["ledger"]):
        tenant(slug)["ledger"] = [calls, cost]
    guardrails = sorted(row[0] for row in database.rows(BEFORE["guardrails"]))
    try:
        shadow = sorted(row[0] for row in database.rows(BEFORE["shadow"]))
    except (psycopg.Error, sqlite3.Error):
        shadow = []
    for data in tenants.values():
        data["violations"] = dict(sorted(data["violations"].items()))
        data["runs"].sort()
        data["guardrails"] = guardrails
        # In shadow with nothing enforced beside it, as before the upgrade.
        data["shadow"] = [[guardrail_id, True] for guardrail_id in shadow]
    return tenants


def normalised_cost(figures: dict[str, Any]) -> dict[str, Any]:
    """The ledger's cost as a number with no trailing zeros, whatever the column's scale."""
    for data in figures.values():
        if data["ledger"]:
            calls, cost = data["ledger"]
            data["ledger"] = [calls, format(float(cost), ".7f").rstrip("0").rstrip(".")]
    return figures


def schema(database: Database | None) -> list[str]:
    """The schema as sorted statements (tables, columns, constraints, indexes, triggers), of
    the restored database or, given None, of the test database that migrate made from empty.
    The database cache's table is left out: it exists where the cache is the database's."""
    if connection.vendor == "postgresql":
        settings = connection.settings_dict
        server = ["-h", settings["HOST"] or "127.0.0.1", "-p", str(settings["PORT"] or 5432)]
        server += ["-U", settings["USER"] or "postgres", database.name if database else settings["NAME"]]
        dumped = subprocess.run(
            ["pg_dump", "--schema-only", "--no-owner", "--no-privileges", *server],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        lines = (line for line in dumped.splitlines() if not line.startswith(("--", "\\", "SET ")))
        statements = (s.strip() for s in "\n".join(lines).split(";\n"))
    else:
        db = sqlite3.connect(database.path if database else connection.settings_dict["NAME"])
        try:
            rows = db.execute("SELECT type, name, tbl_name, sql FROM sqlite_master WHERE name <> 'sqlite_sequence'")
            statements = (" ".join(str(v) for v in row) for row in rows.fetchall())
        finally:
            db.close()
    return sorted(s for s in statements if s and "kindgi_cache" not in s and "set_config" not in s)


@functools.cache
def fresh_schema() -> list[str]:
    return schema(None)


@pytest.fixture
def scratch(tmp_path: Path) -> Path:
    (tmp_path / "var").mkdir()
    return tmp_path


@pytest.fixture(params=DATABASES)
def release(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def restored(release: str, scratch: Path, db: Any) -> Iterator[Database]:
    database = Database(connection.vendor, release, scratch)
    try:
        yield database
    finally:
        database.drop()


def test_every_release_has_a_database_on_each_backend() -> None:
    for database in DATABASES:
        for backend in ("postgresql", "sqlite"):
            assert release_file(database, backend).is_file(), f"{database} has no {backend} database"
    assert list(RELEASES) == sorted(RELEASES, key=list(RELEASES).index)
    assert set(RELEASES.values()) <= set(RELEASES)


def test_a_release_database_upgrades_with_nothing_lost(restored: Database, scratch: Path) -> None:
    add_found_again(restored)
    before = normalised_cost(figures_before(restored))
    assert before["acme"]["traces"] > 0 and before["acme"]["violations"] and before["acme"]["runs"]
    assert before["acme"]["reviewed"] and before["acme"]["ledger"]
    reviews, duplicated = restored.rows(FINDINGS)[0]
    assert duplicated > 2  # the releases' runs stored findings again, and add_found_again did
    labelled = labelled_items(restored)

    console(restored, scratch, "manage.py", "migrate", "--noinput")
    after = normalised_cost(json.loads(console(restored, scratch, "tests/upgrade/read_back.py")))
    assert after == before
    assert restored.rows(FINDINGS)[0] == (reviews, 0)  # one violation per finding, no review lost
    assert restored.rows(LABELS_AFTER)[0][0] == labelled  # each label kept as its labeller's
    assert queues_match_revisions(restored) > 0  # the demo's research-leads escalations

    violations, rolled_up, reviewed, rolled_up_reviewed = restored.rows(ROLLUP)[0]
    assert (rolled_up, rolled_up_reviewed) == (violations, reviewed)

    assert schema(restored) == fresh_schema()
