"""REST ingestion rate against a raw COPY of the same rows into the same PostgreSQL table.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/kindgi_bench python bench/ingest.py

Serves the console with the README's gunicorn command (its Deploying section, read from the
README: DEBUG off) on a free port, posts batches of 1,000 traces over a real socket with an
ingest key, and writes the same number of rows with one psycopg COPY per batch (documents
serialised and hashed inside the timing, as ingestion does). The two alternate for
`--rounds` rounds, so that a shared machine's noise falls on both; each round's rates and
their ratio are printed, then the median ratio. The target is REST at least 0.5 times COPY.
No guardrail is enabled for the bench tenant's traces unless the database has some: the
number measures storing, not evaluating.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import orjson

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.common import free_port  # noqa: E402
from bench.evaluate_api import serve  # noqa: E402
from bench.evaluate_vs_bare import readme_gunicorn  # noqa: E402

TARGET = 0.5

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "kindgi_console.settings")

EXAMPLE: dict[str, Any] = {
    "agent": "support-bot",
    "flow": "refund",
    "startedAt": "2026-11-29T10:00:00Z",
    "endedAt": "2026-11-29T10:00:04Z",
    "input": "Can I get a refund for order 1234?",
    "output": "Yes: orders can be refunded within 30 days [policy-refunds].",
    "messages": [
        {"role": "user", "content": "Can I get a refund for order 1234?"},
        {"role": "assistant", "content": "Yes: orders can be refunded within 30 days."},
    ],
    "toolCalls": [
        {"id": "c1", "name": "lookup_order", "arguments": {"order": "1234"}, "result": {"status": "delivered"}},
        {"id": "c2", "name": "search_policies", "arguments": {"q": "refund"}, "result": ["policy-refunds"]},
    ],
    "citations": [{"source": "policy-refunds", "title": "Refund policy"}],
    "usage": {"inputTokens": 812, "outputTokens": 40, "costUsd": 0.0021, "model": "gpt-4.1-mini"},
}


def traces(prefix: str, count: int) -> list[dict[str, Any]]:
    return [{"id": f"{prefix}-{n:07}", **EXAMPLE} for n in range(count)]


def prepare_database() -> tuple[str, str, str]:
    """Migrate, and create two fresh tenants (REST, COPY) and an ingest key."""
    import django

    django.setup()
    from django.core.management import call_command

    from kindgi_console.tenancy.models import ApiKey, Tenant

    call_command("migrate", verbosity=0)
    stamp = time.strftime("%Y%m%d%H%M%S")
    rest = Tenant.objects.create(slug=f"bench-rest-{stamp}")
    copy = Tenant.objects.create(slug=f"bench-copy-{stamp}")
    secret = ApiKey.issue(scopes=["ingest"], tenant=rest, name="bench")[1]
    return secret, rest.slug, copy.slug


def start_server(port: int, folder: Path) -> subprocess.Popen[bytes]:
    """The README's gunicorn, its limits raised past the bench's rate."""
    workers, options = readme_gunicorn()
    server = serve(
        port,
        workers,
        os.environ["DATABASE_URL"],
        folder / "gunicorn.log",
        options,
        preload=False,
        environment={
            "KINDGI_PRODUCTION": "false",
            "KINDGI_API_RATE": "1000000/minute",
            "KINDGI_RUNTIME_RATE": "10000000/minute",
        },
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:  # gunicorn listens before its workers have booted
        try:
            httpx.get(f"http://127.0.0.1:{port}/api/v1/schemas/runtrace.schema.json", timeout=2)
            return server
        except httpx.TransportError:
            time.sleep(0.2)
    os.killpg(server.pid, signal.SIGKILL)
    raise SystemExit(f"the console did not start:\n{(folder / 'gunicorn.log').read_text()}")


def rest_poster(client: httpx.Client, port: int, secret: str) -> Callable[[list[dict[str, Any]]], float]:
    """A function that posts one batch over the client's connection and returns its seconds."""
    url = f"http://127.0.0.1:{port}/api/v1/traces"
    headers = {"Authorization": f"Bearer {secret}", "Content-Type": "application/json"}

    def post(batch: list[dict[str, Any]]) -> float:
        body = orjson.dumps({"traces": batch})
        started = time.perf_counter()
        response = client.post(url, content=body, headers=headers)
        elapsed = time.perf_counter() - started
        assert response.status_code == 207, response.text[:300]
        return elapsed

    return post


def copier(conn: Any, tenant_slug: str) -> Callable[[list[dict[str, Any]]], float]:
    """A function that COPYs one batch's rows in its own transaction and returns its seconds."""
    from kindgi_console.tenancy.models import Tenant

    tenant_id = Tenant.objects.get(slug=tenant_slug).pk
    columns = "tenant_id, trace_id, agent, flow, started_at, ended_at, document, content_hash, withheld, received_at"

    def copy_batch(batch: list[dict[str, Any]]) -> float:
        started = time.perf_counter()
        with (
            conn.transaction(),
            conn.cursor() as cursor,
            cursor.copy(f"COPY traces_runtrace ({columns}) FROM STDIN") as copy,
        ):
            for doc in batch:
                stored = {**doc, "tenant": tenant_slug}
                text = orjson.dumps(stored, option=orjson.OPT_SORT_KEYS)
                copy.write_row(
                    (
                        tenant_id,
                        doc["id"],
                        doc["agent"],
                        doc["flow"],
                        doc["startedAt"],
                        doc["endedAt"],
                        text.decode(),
                        hashlib.sha256(text).hexdigest(),
                        False,
                        "now",
                    )
                )
        return time.perf_counter() - started

    return copy_batch


def connect() -> Any:
    import psycopg
    from django.db import connection

    settings = connection.settings_dict
    return psycopg.connect(
        psycopg.conninfo.make_conninfo(
            dbname=settings["NAME"],
            user=settings["USER"],
            host=settings["HOST"],
            port=settings["PORT"] or 5432,
            password=settings["PASSWORD"] or None,
        )
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", type=int, default=10)
    parser.add_argument("--size", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    if not os.environ.get("DATABASE_URL", "").startswith("postgres"):
        raise SystemExit("set DATABASE_URL to a PostgreSQL database (it is migrated, and bench tenants are added)")
    secret, rest_tenant, copy_tenant = prepare_database()
    port = free_port()
    ratios = []
    print(f"traces: {args.batches} batches of {args.size} a round; REST tenant {rest_tenant}, COPY {copy_tenant}")
    with tempfile.TemporaryDirectory() as folder:
        server = start_server(port, Path(folder))
        try:
            with httpx.Client(timeout=120) as client, connect() as conn:
                post, copy = rest_poster(client, port, secret), copier(conn, copy_tenant)
                post(traces("warm", 10))
                copy(traces("warm", 10))
                for round_ in range(args.rounds):
                    # One batch each way in turn: a shared machine's drift falls on both.
                    rest_s = copy_s = 0.0
                    for b in range(args.batches):
                        rest_s += post(traces(f"rest-{round_}-{b}", args.size))
                        copy_s += copy(traces(f"copy-{round_}-{b}", args.size))
                    rest, copied = args.batches * args.size / rest_s, args.batches * args.size / copy_s
                    ratios.append(rest / copied)
                    print(
                        f"round {round_ + 1}: REST {rest:8.0f} traces/s   COPY {copied:8.0f} traces/s   "
                        f"ratio {rest / copied:5.2f}"
                    )
        finally:
            os.killpg(server.pid, signal.SIGTERM)
            server.wait(timeout=20)
    print(f"ratio REST/COPY, median of {args.rounds}: {statistics.median(ratios):5.2f}  (target: at least {TARGET})")


if __name__ == "__main__":
    main()
