"""What several benchmarks share: a fresh, migrated PostgreSQL database, stored traces and a free port."""

from __future__ import annotations

import os
import socket
import statistics
import time
from collections.abc import Iterable
from typing import Any

#: The benches' halting guardrail: a zero-llm check that halts a turn calling issue_refund.
NO_REFUNDS: dict[str, Any] = {
    "id": "no-refunds",
    "kind": "zero-llm",
    "check": "never-call-tool",
    "config": {"tools": ["issue_refund"]},
    "action": {"on-violation": "halt"},
    "severity": "critical",
}


def setup_django(database: str) -> None:
    """(Re)create `database` on BENCH_POSTGRES's server, point Django at it and migrate it."""
    server = os.environ.get("BENCH_POSTGRES", "postgres://postgres@127.0.0.1:5432")
    os.environ["DATABASE_URL"] = f"{server}/{database}"
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "kindgi_console.settings")
    import psycopg

    with psycopg.connect(f"{server}/postgres", autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')
        admin.execute(f'CREATE DATABASE "{database}"')
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


def store_run_traces(tenant: Any, documents: Iterable[dict[str, Any]], batch: int = 2000) -> None:
    """Store trace documents as `tenant`'s RunTraces, `batch` rows per insert (never all in memory)."""
    from traces.ingest.documents import content_hash
    from traces.models import RunTrace

    rows: list[RunTrace] = []
    for document in documents:
        rows.append(
            RunTrace(
                tenant=tenant,
                trace_id=document["id"],
                agent=document.get("agent") or "",
                flow=document.get("flow") or "",
                document=document,
                content_hash=content_hash(document),
            )
        )
        if len(rows) == batch:
            RunTrace.objects.bulk_create(rows)
            rows = []
    RunTrace.objects.bulk_create(rows)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def median_get_ms(client: Any, url: str, repeats: int) -> float:
    """The median of `repeats` timed GETs of `url`, in milliseconds, after one GET that warms
    up; every answer must be 200."""
    answer = client.get(url)
    assert answer.status_code == 200, (url, answer.content[:300])
    samples = []
    for _ in range(repeats):
        started = time.perf_counter()
        response = client.get(url)
        samples.append(time.perf_counter() - started)
        assert response.status_code == 200, url
    return statistics.median(samples) * 1000
