"""Read replicas against a real streaming replica: a PostgreSQL primary of the test's own,
a replica made from it with `pg_basebackup` on another port, and the console serving over a
socket with `DATABASE_REPLICA_URLS` naming the replica.

With the replica's replay paused, what a key or a person writes is not on the replica yet:
whoever wrote reads it back (read-your-writes, from the primary), someone else reads the
replica and does not see it until replay resumes; `/readyz` shows the lag. A replica that
stops serves nothing: reads fall back to the primary.
"""

from __future__ import annotations

import html
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.conftest import make_trace
from tests.traces.workers import answers, free_port, wait_for

pytestmark = [pytest.mark.services, pytest.mark.postgresql("a streaming replica of PostgreSQL")]
ROOT = Path(__file__).resolve().parents[2]
PIN_S = 2


def postgres_bin() -> Path:
    found = sorted(Path("/usr/lib/postgresql").glob("*/bin/pg_basebackup"))
    assert found, "PostgreSQL's server binaries are not installed (/usr/lib/postgresql/*/bin)"
    return found[-1].parent


def as_postgres(*command: str | Path) -> None:
    """A PostgreSQL tool run as the postgres user (the server refuses to run as root)."""
    prefix = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
    subprocess.run([*prefix, *map(str, command)], check=True, capture_output=True, timeout=60)


@dataclass
class Pair:
    folder: Path
    primary: int
    replica: int

    def url(self, port: int, name: str = "kindgi") -> str:
        return f"postgres://postgres@127.0.0.1:{port}/{name}"

    def sql(self, port: int, statement: str, name: str = "kindgi") -> Any:
        with psycopg.connect(self.url(port, name), autocommit=True) as connection:
            cursor = connection.execute(statement)
            return cursor.fetchall() if cursor.description else None

    def stop_replica(self) -> None:
        as_postgres(postgres_bin() / "pg_ctl", "-D", self.folder / "replica", "-m", "immediate", "stop")


@pytest.fixture
def pair() -> Iterator[Pair]:
    """A primary that allows replication, and a replica streaming from it."""
    bin_dir = postgres_bin()
    folder = Path(tempfile.mkdtemp(prefix="kindgi-replica-"))
    shutil.chown(folder, "postgres") if os.geteuid() == 0 else None
    primary, replica = free_port(), free_port()
    started: list[str] = []
    try:
        as_postgres(
            bin_dir / "initdb", "-D", folder / "primary", "-A", "trust", "-U", "postgres", "--no-sync", "-E", "UTF8"
        )
        with (folder / "primary" / "postgresql.conf").open("a") as conf:
            conf.write(
                f"port={primary}\nlisten_addresses='127.0.0.1'\nunix_socket_directories='{folder}'\n"
                "fsync=off\nwal_level=replica\nmax_wal_senders=4\nhot_standby=on\n"
            )
        with (folder / "primary" / "pg_hba.conf").open("a") as hba:
            hba.write("host replication all 127.0.0.1/32 trust\n")
        as_postgres(bin_dir / "pg_ctl", "-D", folder / "primary", "-l", folder / "primary.log", "-w", "start")
        started.append("primary")
        as_postgres(
            bin_dir / "pg_basebackup", "-h", "127.0.0.1", "-p", str(primary), "-U", "postgres",
            "-D", folder / "replica", "-R", "-X", "stream",
        )  # fmt: skip
        conf_path = folder / "replica" / "postgresql.conf"
        conf_path.write_text(conf_path.read_text().replace(f"port={primary}", f"port={replica}"))
        as_postgres(bin_dir / "pg_ctl", "-D", folder / "replica", "-l", folder / "replica.log", "-w", "start")
        started.append("replica")
        found = Pair(folder, primary, replica)
        found.sql(primary, "CREATE DATABASE kindgi", name="postgres")
        wait_for(
            lambda: bool(found.sql(replica, "SELECT 1 FROM pg_database WHERE datname = 'kindgi'", "postgres")),
            30,
            "the replica to have the database",
        )
        yield found
    finally:
        for name in reversed(started):
            subprocess.run(
                [
                    "runuser",
                    "-u",
                    "postgres",
                    "--",
                    str(bin_dir / "pg_ctl"),
                    "-D",
                    str(folder / name),
                    "-m",
                    "immediate",
                    "stop",
                ],
                capture_output=True,
                check=False,
            )
        shutil.rmtree(folder, ignore_errors=True)


def console_env(pair: Pair, var: Path) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if not key.startswith(("DATABASE_", "CELERY_", "KINDGI_"))}
    env.update(
        DATABASE_URL=pair.url(pair.primary),
        DATABASE_REPLICA_URLS=pair.url(pair.replica),
        DATABASE_REPLICA_PIN_S=str(PIN_S),
        KINDGI_VAR_DIR=str(var),
        DJANGO_DEBUG="true",
        KINDGI_METRICS_ALLOWED_NETWORKS="127.0.0.1/32",
        PYTHONUNBUFFERED="1",
    )
    return env


def manage(env: dict[str, str], *arguments: str) -> str:
    done = subprocess.run(
        [sys.executable, "manage.py", *arguments], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


SETUP = """
from django.contrib.auth.models import User
from kindgi_console.tenancy.models import ApiKey, Membership, Tenant
acme = Tenant.objects.create(slug="acme", name="Acme")
for name in ("ada", "bea"):
    person = User.objects.create_user(name, password="replica pass 42")
    Membership.objects.create(user=person, tenant=acme, role="admin")
for name in ("writer", "reader"):
    print("key", name, ApiKey.issue(scopes=["ingest", "read"], tenant=acme, name=name)[1])
"""


def sign_in(base: str, username: str) -> httpx.Client:
    client = httpx.Client(base_url=base, timeout=30)
    form = client.get("/login/")
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', form.text)
    assert token, form.text[:500]
    answer = client.post(
        "/login/",
        data={"username": username, "password": "replica pass 42", "csrfmiddlewaretoken": token.group(1)},
        headers={"Referer": f"{base}/login/"},
    )
    assert answer.status_code == 302, answer.text[:500]
    return client


def create_key(client: httpx.Client, base: str, name: str) -> None:
    page = client.get("/manage/api-keys/")
    fields = dict(
        re.findall(r'<input type="hidden" name="(csrfmiddlewaretoken|form_token)" value="([^"]+)"', page.text)
    )
    answer = client.post(
        "/manage/api-keys/",
        data={**fields, "action": "create", "name": name, "tenant": "acme", "scopes": "read"},
        headers={"Referer": f"{base}/manage/api-keys/"},
    )
    assert answer.status_code == 200 and "Your new key" in answer.text, answer.text[:800]


def key_names(client: httpx.Client) -> str:
    return html.unescape(client.get("/manage/api-keys/").text)


def test_reads_go_to_the_replica_and_whoever_wrote_reads_the_primary(pair: Pair, tmp_path: Path) -> None:
    env = console_env(pair, tmp_path)
    manage(env, "migrate", "--noinput")
    manage(env, "createcachetable")
    issued = [line.split() for line in manage(env, "shell", "-c", SETUP).splitlines() if line.startswith("key ")]
    keys = {name: secret for _, name, secret in issued}
    wait_for(
        lambda: bool(pair.sql(pair.replica, "SELECT 1 FROM tenancy_apikey WHERE name = 'reader'")),
        30,
        "the keys on the replica",
    )
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    server = subprocess.Popen(
        [sys.executable, "manage.py", "runserver", "--noreload", f"127.0.0.1:{port}"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=open(tmp_path / "server.log", "wb"),  # noqa: SIM115 - closed with the process
    )
    try:
        wait_for(lambda: answers(port), 60, "the console to serve")
        writer = httpx.Client(base_url=base, headers={"Authorization": f"Bearer {keys['writer']}"}, timeout=30)
        reader = httpx.Client(base_url=base, headers={"Authorization": f"Bearer {keys['reader']}"}, timeout=30)
        ready = httpx.get(f"{base}/readyz").json()
        assert ready["replicas"] == [{"alias": "replica1", "lagSeconds": 0.0, "servesReads": True}], ready
        ada, bea = sign_in(base, "ada"), sign_in(base, "bea")
        time.sleep(PIN_S + 0.5)  # signing in is a write: their pins run out

        pair.sql(pair.replica, "SELECT pg_wal_replay_pause()")
        # An API key writes, then reads what it wrote; another key reads the replica.
        stored = writer.post("/api/v1/traces", json=make_trace("replica-0001"), params={"tenant": "acme"})
        assert stored.status_code in (200, 201, 202), stored.text
        assert writer.get("/api/v1/traces/replica-0001", params={"tenant": "acme"}).status_code == 200
        assert reader.get("/api/v1/traces/replica-0001", params={"tenant": "acme"}).status_code == 404
        # A person writes in a page, then sees it; another person reads the replica.
        create_key(ada, base, "made while the replica waits")
        assert "made while the replica waits" in key_names(ada)
        assert "made while the replica waits" not in key_names(bea)
        time.sleep(1.1)
        lagging = httpx.get(f"{base}/readyz").json()["replicas"][0]
        assert lagging["lagSeconds"] > 0 and lagging["servesReads"], lagging
        metrics = {
            sample.name: sample.value
            for family in text_string_to_metric_families(httpx.get(f"{base}/metrics").text)
            for sample in family.samples
            if sample.labels.get("replica") == "replica1"
        }
        assert metrics["kindgi_replica_serving"] == 1 and metrics["kindgi_replica_lag_seconds"] > 0, metrics

        pair.sql(pair.replica, "SELECT pg_wal_replay_resume()")
        wait_for(
            lambda: reader.get("/api/v1/traces/replica-0001", params={"tenant": "acme"}).status_code == 200,
            30,
            "the replica to replay the trace",
        )
        assert "made while the replica waits" in key_names(bea)

        # A replica that stops serves nothing: reads go to the primary again.
        pair.stop_replica()
        wait_for(
            lambda: reader.get("/api/v1/traces", params={"tenant": "acme"}).status_code == 200,
            30,
            "reads on the primary",
        )
        down = httpx.get(f"{base}/readyz").json()
        assert down["status"] == "ok" and down["replicas"][0]["servesReads"] is False, down
        assert down["replicas"][0]["error"] == "OperationalError", down
        assert "made while the replica waits" in key_names(bea)
    finally:
        server.terminate()
        server.wait(timeout=10)


def test_replicas_are_postgresql_streaming_from_a_postgresql_primary(tmp_path: Path) -> None:
    env = {**os.environ, "DATABASE_URL": f"sqlite:///{tmp_path}/db.sqlite3", "KINDGI_VAR_DIR": str(tmp_path)}
    env["DATABASE_REPLICA_URLS"] = "postgres://postgres@127.0.0.1:5432/replica"
    done = subprocess.run([sys.executable, "manage.py", "check"], cwd=ROOT, env=env, capture_output=True, text=True)
    assert done.returncode != 0
    assert "DATABASE_REPLICA_URLS: read replicas are PostgreSQL streaming from DATABASE_URL" in done.stderr
