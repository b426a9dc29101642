"""Peak memory of an evaluation run and of an upload, at two input sizes, side by side.

Run: `python bench/evaluation_memory.py [small] [large]` (default 10000 100000 traces). Each
measurement runs in a fresh process on a throw-away SQLite database (tasks run eagerly, in
that process), and reports its peak resident memory above a process that only started
Django and the engine. Bounded memory means the large/small ratio stays near 1 although the
input grew tenfold. Prints, never asserts: numbers depend on the machine.

`python bench/evaluation_memory.py --postgres 1000000 [--db kindgi_memory_bench]` measures a
worker's whole peak resident memory (not above a bare process: the figure to hold under
200 MB) during a run over that many traces stored in PostgreSQL (BENCH_POSTGRES's server,
default the local one; the database is made again), generated in the database with
`generate_series` (the traces this bench uploads, three guardrails).
"""

from __future__ import annotations

import gzip
import os
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.common import store_run_traces  # noqa: E402


def setup_django(work: Path, database_url: str | None = None) -> None:
    os.environ.update(
        {
            "KINDGI_VAR_DIR": str(work / "var"),
            "DATABASE_URL": database_url or f"sqlite:///{work / 'db.sqlite3'}",
            "DJANGO_SETTINGS_MODULE": "kindgi_console.settings",
            "KINDGI_LOG_LEVEL": "WARNING",
            # As a deployed worker runs: with DEBUG on, Django keeps the last 9,000 queries'
            # SQL (bulk inserts included), which would be measured instead of the run.
            "DJANGO_DEBUG": "false",
            "DJANGO_SECRET_KEY": "bench-only-not-secret",
        }
    )
    import django

    django.setup()
    from kindgi_console.celery import app

    app.conf.task_always_eager = True


def trace(n: int, tenant: str) -> dict[str, Any]:
    calls = [{"id": "c1", "name": "lookup_order", "arguments": {"order": str(n)}, "result": {"ok": True}}]
    if n % 4 == 0:
        calls.append({"id": "c2", "name": "issue_refund", "arguments": {"order": str(n)}, "result": "ok"})
    return {
        "id": f"run-{n:07d}",
        "tenant": tenant,
        "agent": "support-bot",
        "flow": "refund",
        "input": f"Can I get a refund for order {n}?",
        "output": f"Orders can be refunded within 30 days [policy-refunds]. Order {n}: " + "details " * 40,
        "messages": [{"role": "user", "content": f"Refund order {n}?"}],
        "toolCalls": calls,
    }


def populate(work: Path, count: int) -> None:
    """The database (traces of acme, three guardrails) and a .jsonl.gz of globex traces."""
    import orjson
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    from guardrails.services import Author, save_guardrail
    from kindgi_console.tenancy.models import Tenant

    acme = Tenant.objects.create(slug="acme", name="Acme")
    Tenant.objects.create(slug="globex", name="Globex")
    author = Author(user=None, label="bench")
    for document in guardrails():
        save_guardrail(document, author)
    store_run_traces(acme, (trace(n, "acme") for n in range(count)), batch=5000)
    with gzip.open(work / "traces.jsonl.gz", "wb") as out:
        for n in range(count):
            out.write(orjson.dumps(trace(n, "globex")) + b"\n")


def guardrails() -> list[dict[str, object]]:
    base = {"kind": "zero-llm", "action": {"on-violation": "log-only"}, "severity": "warn"}
    return [
        {**base, "id": "no-refunds", "check": "never-call-tool", "config": {"tools": ["issue_refund"]}},
        {**base, "id": "cite", "check": "must-cite", "config": {"min": 1}},
        {**base, "id": "max-calls", "check": "max-tool-calls", "config": {"max": 1}},
    ]


def evaluate() -> str:
    from kindgi_console.tenancy.models import Tenant
    from traces.models import Evaluation
    from traces.runs import evaluations

    run = evaluations.create_run(evaluations.RunRequest(tenant=Tenant.objects.get(slug="acme")))
    run = Evaluation.objects.get(pk=run.pk)
    return f"{run.status} {run.done}/{run.total}"


def upload(work: Path) -> str:
    from django.core.files import File

    from kindgi_console.tenancy.models import Tenant
    from traces.ingest.uploads import save_upload
    from traces.models import Upload

    with open(work / "traces.jsonl.gz", "rb") as handle:
        saved = save_upload(File(handle, name="traces.jsonl.gz"), Tenant.objects.get(slug="globex"), None)
    saved = Upload.objects.get(pk=saved.pk)
    return f"{saved.status} {saved.lines_stored} stored"


def populated(work: Path, count: int) -> str:
    populate(work, count)
    return ""


def child(step: str, work: Path, count: int) -> None:
    setup_django(work)
    from guardrails import deployment

    deployment.engine()
    started = time.perf_counter()
    steps: dict[str, Callable[[], str]] = {
        "baseline": lambda: "",
        "populate": lambda: populated(work, count),
        "evaluate": evaluate,
        "upload": lambda: upload(work),
    }
    outcome = steps[step]()
    elapsed = time.perf_counter() - started
    peak_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(f"{peak_kb} {elapsed:.1f} {outcome}")


GENERATE = """
INSERT INTO traces_runtrace (tenant_id, trace_id, agent, flow, document, content_hash, withheld, received_at)
SELECT %(tenant)s, 'run-' || lpad(n::text, 7, '0'), 'support-bot', 'refund',
       jsonb_build_object(
         'id', 'run-' || lpad(n::text, 7, '0'), 'tenant', 'acme', 'agent', 'support-bot', 'flow', 'refund',
         'input', 'Can I get a refund for order ' || n || '?',
         'output', 'Orders can be refunded within 30 days [policy-refunds]. Order ' || n || ': '
                   || repeat('details ', 40),
         'messages', jsonb_build_array(jsonb_build_object('role', 'user', 'content', 'Refund order ' || n || '?')),
         'toolCalls', CASE WHEN n %% 4 = 0 THEN jsonb_build_array(
             jsonb_build_object('id', 'c1', 'name', 'lookup_order', 'arguments', jsonb_build_object('order', n::text),
                                'result', jsonb_build_object('ok', true)),
             jsonb_build_object('id', 'c2', 'name', 'issue_refund', 'arguments', jsonb_build_object('order', n::text),
                                'result', 'ok'))
           ELSE jsonb_build_array(
             jsonb_build_object('id', 'c1', 'name', 'lookup_order', 'arguments', jsonb_build_object('order', n::text),
                                'result', jsonb_build_object('ok', true))) END),
       md5(n::text) || md5(n::text), false, now()
FROM generate_series(%(start)s, %(stop)s) AS n
"""


def postgres_child(database: str, count: int) -> None:
    """Generate `count` traces in a fresh PostgreSQL database, then (its own peak counted
    from there) run an evaluation over them in this process, as one worker would."""
    server = os.environ.get("BENCH_POSTGRES", "postgres://postgres@127.0.0.1:5432")
    import psycopg

    with psycopg.connect(f"{server}/postgres", autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')
        admin.execute(f'CREATE DATABASE "{database}"')
    setup_django(Path(tempfile.mkdtemp(prefix="kindgi-bench-")), f"{server}/{database}")
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    from django.db import connection

    from guardrails.services import Author, save_guardrail
    from kindgi_console.tenancy.models import Tenant

    acme = Tenant.objects.create(slug="acme", name="Acme")
    for document in guardrails():
        save_guardrail(document, Author(user=None, label="bench"))
    started = time.perf_counter()
    with connection.cursor() as cursor:
        for start in range(0, count, 100_000):
            cursor.execute(GENERATE, {"tenant": acme.pk, "start": start, "stop": min(count, start + 100_000) - 1})
        cursor.execute("VACUUM ANALYZE traces_runtrace")
    print(f"generated {count:,} traces in {time.perf_counter() - started:.0f} s", flush=True)
    from guardrails import deployment

    deployment.engine()
    before_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    started = time.perf_counter()
    outcome = evaluate()
    peak_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(
        f"evaluate {count:>9,} traces: {peak_kb / 1024:.1f} MB peak resident (the worker's whole "
        f"memory; {before_kb / 1024:.1f} MB before the run), {time.perf_counter() - started:.0f} s, {outcome}"
    )


def measure(step: str, work: Path, count: int) -> tuple[float, float, str]:
    result = subprocess.run(
        [sys.executable, __file__, "--child", step, str(work), str(count)],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
    )
    peak_kb, seconds, *outcome = result.stdout.strip().splitlines()[-1].split(" ")
    return int(peak_kb) / 1024, float(seconds), " ".join(outcome)


def main(sizes: list[int]) -> None:
    rows: dict[str, list[tuple[float, float, str]]] = {"evaluate": [], "upload": []}
    for count in sizes:
        with tempfile.TemporaryDirectory(prefix="kindgi-bench-") as folder:
            work = Path(folder)
            measure("populate", work, count)
            baseline = measure("baseline", work, count)[0]
            for step in rows:
                peak, seconds, outcome = measure(step, work, count)
                rows[step].append((peak - baseline, seconds, outcome))
                print(
                    f"{step:9} {count:>8} traces: +{peak - baseline:7.1f} MB peak above a bare process "
                    f"({peak:.1f} MB), {seconds:6.1f} s, {outcome}",
                    flush=True,
                )
    print()
    print(f"{'':9} {'peak MB at ' + str(sizes[0]):>18} {'peak MB at ' + str(sizes[1]):>18} {'ratio':>7}")
    for step, (small, large) in rows.items():
        ratio = large[0] / small[0] if small[0] > 0 else float("nan")
        print(f"{step:9} {small[0]:18.1f} {large[0]:18.1f} {ratio:7.2f}   (input x{sizes[1] / sizes[0]:.0f})")


if __name__ == "__main__":
    if sys.argv[1:2] == ["--child"]:
        child(sys.argv[2], Path(sys.argv[3]), int(sys.argv[4]))
    elif sys.argv[1:2] == ["--postgres"]:
        postgres_child(sys.argv[4] if sys.argv[3:4] == ["--db"] else "kindgi_memory_bench", int(sys.argv[2]))
    else:
        main([int(a) for a in sys.argv[1:3]] if len(sys.argv) > 2 else [10_000, 100_000])
