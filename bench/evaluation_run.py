"""Background evaluation against the CI path: the same traces, the same guardrails, side by side.

    CELERY_BROKER_URL=redis://127.0.0.1:6379/3 python bench/evaluation_run.py [--traces 20000]

It (re)creates a PostgreSQL database (BENCH_POSTGRES's server, default the local one; the
database named by --db), stores the traces that `bench/guardrail_ci.py` generates and the seven
example guardrails, then times, on the same traces and guardrails:

- `manage.py guardrail_ci` over the trace file (the CI path; best of two, whole process),
  just before and just after each of the paths below, whose ratio is taken against the mean;
- an evaluation run in this process (tasks run eagerly): planning, reading the traces,
  evaluating, writing results, violations and roll-ups, progress and the summary;
- `evaluate_ingested` (the runtime evaluation of ingested batches) over the same traces, in
  batches of 1,000 as ingestion queues them;
- an evaluation run on 1 and on 2 real Celery workers (concurrency 1 each) on the broker
  of CELERY_BROKER_URL (Redis), from the request to the run's `succeeded`.

It also prints the peak memory of the workers (VmHWM of each worker and its pool process,
read from /proc before they stop; the CI command's is `bench/guardrail_ci.py`'s to measure).

Rates are guardrail evaluations per second (traces x guardrails, as the CI command counts
them); each path is printed as a ratio of the CI path's rate (the target is 0.25 or more),
by wall time and, for the paths run in this process, by CPU time (this process and its
PostgreSQL backend against the CI command), which a busy machine does not skew.
Prints, never asserts: timings depend on the machine.
"""

from __future__ import annotations

import argparse
import os
import resource
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.common import store_run_traces  # noqa: E402
from bench.guardrail_ci import write_inputs  # noqa: E402  (the CI bench's traces, unchanged)


def setup_django(database: str) -> str:
    """A fresh, migrated database; returns its URL (the workers open it too)."""
    server = os.environ.get("BENCH_POSTGRES", "postgres://postgres@127.0.0.1:5432")
    url = f"{server}/{database}"
    os.environ.update(
        {
            "DATABASE_URL": url,
            "DJANGO_SETTINGS_MODULE": "kindgi_console.settings",
            "DJANGO_DEBUG": "false",  # as a worker runs: no SQL kept in memory
            "DJANGO_SECRET_KEY": "bench-only-not-secret",
            "KINDGI_LOG_LEVEL": "WARNING",
        }
    )
    import psycopg

    with psycopg.connect(f"{server}/postgres", autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')
        admin.execute(f'CREATE DATABASE "{database}"')
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    return url


def load(guardrails: list[Path], traces: Path) -> Any:
    """The guardrails (enabled) and the traces, stored as ingestion stores them."""
    import orjson

    from guardrails.services import Author, save_guardrail
    from kindgi_console.tenancy.models import Tenant

    acme = Tenant.objects.create(slug="acme", name="Acme")
    for path in guardrails:
        save_guardrail(orjson.loads(path.read_bytes()), Author(user=None, label="bench"), enabled=True)
    with traces.open("rb") as handle:
        store_run_traces(acme, (orjson.loads(line) for line in handle))
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("VACUUM ANALYZE")
    return acme


Timing = tuple[float, float | None]  # wall seconds, CPU seconds (None: not measured)


def time_ci(guardrails: list[Path], traces: Path, folder: Path) -> Timing:
    """Wall and CPU time of the faster of two runs of the CI command, whole process."""
    command = [
        sys.executable,
        "manage.py",
        "guardrail_ci",
        "--guardrails",
        *map(str, guardrails),
        "--traces",
        str(traces),
        "--format",
        "json",
        "--output",
        str(folder / "report.json"),
    ]
    runs = []
    for _ in range(2):
        cpu = children_cpu()
        started = time.perf_counter()
        done = subprocess.run(command, cwd=ROOT, capture_output=True, check=False)
        runs.append((time.perf_counter() - started, children_cpu() - cpu))
        if done.returncode not in (0, 1):
            sys.exit(f"guardrail_ci failed:\n{done.stderr.decode()}")
    return min(runs)


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def own_cpu() -> float:
    """CPU seconds of this process and of its PostgreSQL backend (on this machine): the
    cost of a path whatever else the machine is doing."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        (pid,) = cursor.fetchone()
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return time.process_time() + (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def time_run_in_process(tenant: Any) -> Timing:
    from kindgi_console.celery import app
    from traces.models import Evaluation
    from traces.runs import evaluations

    app.conf.task_always_eager = True
    cpu, started = own_cpu(), time.perf_counter()
    run = evaluations.create_run(evaluations.RunRequest(tenant=tenant, label="bench"))
    seconds, cpu = time.perf_counter() - started, own_cpu() - cpu
    status = Evaluation.objects.get(pk=run.pk).status
    assert status == "succeeded", status
    return seconds, cpu


def time_ingested() -> Timing:
    from traces.ingest.evaluate import evaluate_stored_traces
    from traces.models import RunTrace

    ids = list(RunTrace.objects.order_by("pk").values_list("pk", flat=True))
    cpu, started = own_cpu(), time.perf_counter()
    for low in range(0, len(ids), 1000):
        evaluate_stored_traces(ids[low : low + 1000])
    return time.perf_counter() - started, own_cpu() - cpu


def start_workers(count: int, url: str, log_dir: Path) -> list[subprocess.Popen[bytes]]:
    from kindgi_console.workers import worker_command

    env = {**os.environ, "DATABASE_URL": url, "CELERY_TASK_ALWAYS_EAGER": "false"}
    workers = []
    for n in range(count):
        log = (log_dir / f"worker-{count}-{n}.log").open("wb")
        workers.append(
            subprocess.Popen(
                worker_command(concurrency=1, name=f"bench{count}-{n}", quiet=True, heartbeat=False),
                cwd=ROOT,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        )
    for n in range(count):
        path = log_dir / f"worker-{count}-{n}.log"
        deadline = time.monotonic() + 60
        while b" ready." not in path.read_bytes():
            if time.monotonic() > deadline:
                sys.exit(f"worker did not start:\n{path.read_text()}")
            time.sleep(0.1)
    return workers


def stop_workers(workers: list[subprocess.Popen[bytes]]) -> None:
    for worker in workers:
        os.killpg(worker.pid, signal.SIGTERM)
    for worker in workers:
        worker.wait(timeout=30)


#: The peak resident memory (MB) of each worker process and its pool process, read before it stops.
WORKER_PEAKS: list[float] = []


def peak_rss_of_group(group: int) -> float:
    """The largest peak resident set (VmHWM, MB) of the processes of a process group: a
    worker started in its own session and its pool process. Read from /proc while they
    live: getrusage(RUSAGE_CHILDREN) would count, for every child, this process's own peak
    at the moment it was started (Linux keeps the parent's high-water mark across exec)."""
    peak = 0
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            if int(stat.read_text().rsplit(")", 1)[1].split()[2]) != group:
                continue
            status = (stat.parent / "status").read_text()
        except (OSError, IndexError, ValueError):
            continue  # a process that ended meanwhile
        for line in status.splitlines():
            if line.startswith("VmHWM:"):
                peak = max(peak, int(line.split()[1]))
    return peak / 1024


def time_run_on_workers(tenant: Any, count: int, url: str, log_dir: Path) -> Timing:
    from kindgi_console.celery import app
    from traces.models import Evaluation
    from traces.runs import evaluations

    app.conf.task_always_eager = False
    app.control.purge()
    workers = start_workers(count, url, log_dir)
    try:
        started = time.perf_counter()
        run = evaluations.create_run(evaluations.RunRequest(tenant=tenant, label=f"bench {count}"))
        while Evaluation.objects.filter(pk=run.pk).values_list("status", flat=True).get() in ("queued", "running"):
            time.sleep(0.02)
        seconds = time.perf_counter() - started
        WORKER_PEAKS.extend(peak_rss_of_group(worker.pid) for worker in workers)
    finally:
        stop_workers(workers)
    status = Evaluation.objects.get(pk=run.pk).status
    assert status == "succeeded", status
    return seconds, None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--traces", type=int, default=20_000)
    parser.add_argument("--db", default="kindgi_evalrun_bench")
    parser.add_argument("--workers", default="1,2", help="worker counts to time ('' for none)")
    args = parser.parse_args()
    url = setup_django(args.db)
    with tempfile.TemporaryDirectory(prefix="kindgi-bench-") as tmp:
        folder = Path(tmp)
        guardrails, traces, _documents = write_inputs(folder, args.traces)
        tenant = load(guardrails, traces)
        evaluations = args.traces * len(guardrails)
        print(f"{args.traces:,} traces x {len(guardrails)} guardrails = {evaluations:,} evaluations")

        def ci() -> Timing:
            return time_ci(guardrails, traces, folder)

        rows = [
            side_by_side("evaluation run, in process", lambda: time_run_in_process(tenant), ci),
            side_by_side("evaluate_ingested, batches of 1,000", time_ingested, ci),
        ]
        for count in [int(n) for n in args.workers.split(",") if n]:
            rows.append(
                side_by_side(
                    f"evaluation run, {count} worker(s)", partial(time_run_on_workers, tenant, count, url, folder), ci
                )
            )
    if WORKER_PEAKS:
        print(f"\nlargest peak RSS of a worker or its pool process: {max(WORKER_PEAKS):.0f} MB", end="")
        print(f" (this process, holding the traces it stored: {own_peak_mb():.0f} MB)")
    print(f"{'path':<38} {'seconds':>8} {'evaluations/s':>14} {'CI s':>6} {'ratio to CI':>12} {'CPU ratio':>10}")
    for name, (seconds, cpu), (ci_seconds, ci_cpu) in rows:
        cpu_ratio = f"{ci_cpu / cpu:10.3f}" if cpu and ci_cpu else f"{'':>10}"
        print(
            f"{name:<38} {seconds:>8.2f} {evaluations / seconds:>14,.0f} {ci_seconds:>6.2f} "
            f"{ci_seconds / seconds:>12.3f} {cpu_ratio}"
        )


def own_peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def side_by_side(name: str, path: Callable[[], Timing], ci: Callable[[], Timing]) -> tuple[str, Timing, Timing]:
    """The path's times and the CI path's, timed just before and just after it (their mean):
    on a shared machine the load changes from one minute to the next. The CPU ratio (CPU
    seconds of the CI command against those of the path and its database backend) does
    not depend on the load."""
    before = ci()
    timing = path()
    after = ci()
    return name, timing, ((before[0] + after[0]) / 2, ((before[1] or 0) + (after[1] or 0)) / 2)


if __name__ == "__main__":
    main()
