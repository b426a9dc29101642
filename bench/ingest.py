"""REST ingestion rate against a raw COPY of the same rows into the same PostgreSQL table.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/kindgi_bench python bench/ingest.py

Starts the console (`manage.py runserver`, DEBUG off) on a free port, posts batches of
1,000 traces over a real socket with an ingest key, then writes the same number of rows
with one psycopg COPY per batch (documents serialised and hashed inside the timing, as
ingestion does), and prints both rates and their ratio. The target is REST at least 0.25
times COPY. No guardrail is enabled for the bench tenant's traces unless the database has
some: the number measures storing, not evaluating.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import orjson

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.common import free_port  # noqa: E402

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


def start_server(port: int) -> subprocess.Popen[bytes]:
    env = {
        **os.environ,
        "DJANGO_DEBUG": "false",
        "DJANGO_SECRET_KEY": "bench-only-not-secret",
        "DJANGO_SECURE_SSL_REDIRECT": "false",
        "KINDGI_PRODUCTION": "false",
        "KINDGI_API_RATE": "1000000/minute",
    }
    server = subprocess.Popen(
        [sys.executable, str(ROOT / "manage.py"), "runserver", f"127.0.0.1:{port}", "--noreload"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            httpx.get(f"http://127.0.0.1:{port}/api/v1/schemas/runtrace.schema.json", timeout=1)
            return server
        except httpx.TransportError:
            time.sleep(0.2)
    server.kill()
    raise SystemExit("the console did not start")


def rest_rate(port: int, secret: str, batches: int, size: int) -> float:
    url = f"http://127.0.0.1:{port}/api/v1/traces"
    headers = {"Authorization": f"Bearer {secret}", "Content-Type": "application/json"}
    bodies = [orjson.dumps({"traces": traces(f"rest-{b}", size)}) for b in range(batches)]
    with httpx.Client(timeout=120) as client:
        warm = client.post(url, content=orjson.dumps({"traces": traces("warm", 10)}), headers=headers)
        assert warm.status_code == 207, warm.text
        started = time.perf_counter()
        for body in bodies:
            response = client.post(url, content=body, headers=headers)
            assert response.status_code == 207, response.text[:300]
        elapsed = time.perf_counter() - started
    return batches * size / elapsed


def copy_rate(tenant_slug: str, batches: int, size: int) -> float:
    import psycopg
    from django.db import connection

    from kindgi_console.tenancy.models import Tenant

    tenant_id = Tenant.objects.get(slug=tenant_slug).pk
    documents = [traces(f"copy-{b}", size) for b in range(batches)]
    columns = "tenant_id, trace_id, agent, flow, started_at, ended_at, document, content_hash, withheld, received_at"
    settings = connection.settings_dict
    conninfo = psycopg.conninfo.make_conninfo(
        dbname=settings["NAME"],
        user=settings["USER"],
        host=settings["HOST"],
        port=settings["PORT"] or 5432,
        password=settings["PASSWORD"] or None,
    )
    with psycopg.connect(conninfo) as conn:
        started = time.perf_counter()
        for batch in documents:
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
        elapsed = time.perf_counter() - started
    return batches * size / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", type=int, default=10)
    parser.add_argument("--size", type=int, default=1000)
    args = parser.parse_args()
    if not os.environ.get("DATABASE_URL", "").startswith("postgres"):
        raise SystemExit("set DATABASE_URL to a PostgreSQL database (it is migrated, and bench tenants are added)")
    secret, rest_tenant, copy_tenant = prepare_database()
    port = free_port()
    server = start_server(port)
    try:
        rest = rest_rate(port, secret, args.batches, args.size)
    finally:
        server.terminate()
        server.wait(timeout=10)
    copy = copy_rate(copy_tenant, args.batches, args.size)
    print(f"traces:          {args.batches} batches of {args.size}")
    print(f"REST ingestion:  {rest:10.0f} traces/s  (tenant {rest_tenant})")
    print(f"psycopg COPY:    {copy:10.0f} traces/s  (tenant {copy_tenant})")
    print(f"ratio REST/COPY: {rest / copy:10.2f}  (target: at least 0.25)")


if __name__ == "__main__":
    main()
