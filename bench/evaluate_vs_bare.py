"""`POST /api/v1/evaluate` against the floor of its stack: a bare Django view, in one run.

    python bench/evaluate_vs_bare.py [--rounds 3] [--seconds 15] [--clients 16] [--rate RATE]

Both are served by gunicorn with the README's own command (its Deploying section, read from
README.md: the same workers, threads, keep-alive and timeout) on the same PostgreSQL database,
and driven by wrk with the same body (a realistic turn, a fresh id per request):

- **console**: the console's verdict, the seven example guardrails enabled, the trace and its
  results stored, with the throttle a deployment has (KINDGI_RUNTIME_RATE's default, on the
  cache of KINDGI_CACHE_URL; `--rate` sets another);
- **bare**: `bench/bare/`, a Django project with no app and no middleware whose one view
  parses the body with `json.loads` and inserts it as one row (`bench.bare.views`).

The loads alternate (bare, console, bare, console, ...) so that whatever else the machine runs
falls on both alike; each line is one load, then the medians and the ratios the issue sets
(issue 28: console req/s at least 0.5x the bare view's, median latency at most 2x). The CPU
per request of the gunicorn processes and of the database's backends (from /proc) does not
depend on the machine's load. Last, in process: the queries one verdict makes, and the runtime
throttle's cost per request at the default rate. Prints, never asserts.
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import shutil
import signal
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.common import free_port  # noqa: E402
from bench.evaluate_api import CpuMeter, arrange, load, script, serve  # noqa: E402
from bench.evaluation_run import setup_django  # noqa: E402

TARGET_RPS, TARGET_P50 = 0.5, 2.0


def readme_gunicorn() -> tuple[int, tuple[str, ...]]:
    """The workers and the other options of the README's gunicorn command (its address aside)."""
    text = (ROOT / "README.md").read_text()
    found = re.search(r"^\.venv/bin/gunicorn kindgi_console\.wsgi:application((?:.*\\\n)*.*)$", text, re.M)
    if found is None:
        raise SystemExit("README.md has no `.venv/bin/gunicorn kindgi_console.wsgi:application` command")
    words = shlex.split(found.group(1).replace("\\\n", " "))
    workers, options = 1, []
    pairs = iter(words)
    for word in pairs:
        if word in ("--bind", "-b"):
            next(pairs)
        elif word in ("--workers", "-w"):
            workers = int(next(pairs))
        else:
            options.append(word)
    return workers, tuple(options)


def create_bare_table() -> None:
    from django.db import connection

    from bench.bare.views import CREATE

    with connection.cursor() as cursor:
        cursor.execute(CREATE)


def queries_per_verdict(key: str) -> list[str]:
    """The SQL of one verdict in process (after a first one: caches warm), as Django logs it."""
    import random

    import orjson
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext

    from bench.guardrail_ci import make_trace

    client = Client(HTTP_AUTHORIZATION=f"Bearer {key}")
    trace = make_trace(1, random.Random(28))
    for n in range(2):
        with CaptureQueriesContext(connection) as captured:
            answer = client.post(
                "/api/v1/evaluate", orjson.dumps({**trace, "id": f"counted-{n}"}), content_type="application/json"
            )
        assert answer.status_code == 200, answer.content[:300]
    return [query["sql"] for query in captured.captured_queries]


def throttle_cost(key_secret: str, requests: int = 6000) -> tuple[float, float]:
    """Wall and CPU microseconds per request of the runtime throttle at the deployment's rate,
    on the shared cache, once `requests` requests are in its window."""
    from django.test import RequestFactory
    from rest_framework.request import Request

    from kindgi_console.api import ApiKeyAuthentication, RuntimeRateThrottle

    http = RequestFactory().post("/api/v1/evaluate", HTTP_AUTHORIZATION=f"Bearer {key_secret}")
    request = Request(http, authenticators=[ApiKeyAuthentication()])
    request.user  # noqa: B018  (authenticates: the throttle reads the key)
    view: Any = None
    for _ in range(requests):
        RuntimeRateThrottle().allow_request(request, view)
    wall, cpu = time.perf_counter(), time.process_time()
    count = 500
    for _ in range(count):
        RuntimeRateThrottle().allow_request(request, view)
    return (time.perf_counter() - wall) * 1e6 / count, (time.process_time() - cpu) * 1e6 / count


def answering(port: int, key: str, within: float = 180) -> None:
    """Wait until the server answers a verdict (gunicorn listens before its workers have booted)."""
    import http.client
    import random

    import orjson

    from bench.guardrail_ci import make_trace

    body = orjson.dumps({**make_trace(1, random.Random(28)), "id": f"ready-{port}-{time.time()}"})
    headers = {"Content-Type": "application/json", "Authorization": f"Bearer {key}"}
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        client = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        try:
            client.request("POST", "/api/v1/evaluate", body, headers)
            if client.getresponse().status == 200:
                return
        except OSError:
            pass
        finally:
            client.close()
        time.sleep(0.5)
    raise SystemExit(f"the server on port {port} did not answer a verdict in {within:.0f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3, help="loads of each, alternated")
    parser.add_argument("--seconds", type=int, default=15)
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--db", default="kindgi_vs_bare_bench")
    parser.add_argument("--rate", default=None, help="KINDGI_RUNTIME_RATE (default: the setting's default)")
    args = parser.parse_args()
    if shutil.which("wrk") is None:
        raise SystemExit("wrk is needed: apt-get install -y wrk")
    os.environ["DJANGO_SECURE_SSL_REDIRECT"] = "false"
    os.environ.pop("KINDGI_API_RATE", None)
    os.environ.pop("KINDGI_RUNTIME_RATE", None)
    if args.rate:
        os.environ["KINDGI_RUNTIME_RATE"] = args.rate
    url = setup_django(args.db)
    key = arrange()
    create_bare_table()
    workers, options = readme_gunicorn()
    from django.conf import settings

    cache = str(settings.CACHES["default"]["BACKEND"]).rsplit(".", 1)[-1]
    print(
        f"gunicorn {workers} workers {' '.join(options)} (README); wrk {args.clients} connections; "
        f"runtime throttle {settings.KINDGI_RUNTIME_RATE} on {cache}"
    )
    rows: dict[str, list[dict[str, float]]] = {"bare": [], "console": []}
    with tempfile.TemporaryDirectory(prefix="kindgi-bench-") as tmp:
        lua = script(Path(tmp), key)
        ports = {"bare": free_port(), "console": free_port()}
        servers = {
            "bare": serve(
                ports["bare"],
                workers,
                url,
                Path(tmp) / "bare.log",
                options,
                application="bench.bare.wsgi:application",
                preload=False,
                environment={"DJANGO_SETTINGS_MODULE": "bench.bare.settings"},
            ),
            "console": serve(ports["console"], workers, url, Path(tmp) / "console.log", options, preload=False),
        }
        try:
            for name in ("bare", "console"):  # every worker booted and connected, its guardrails compiled
                answering(ports[name], key)
                load(ports[name], lua, args.clients, 5, timeout=60)
            print(f"{'':>8} {'req/s':>8} {'p50 ms':>8} {'p99 ms':>8} | CPU ms per request: {'app':>6} {'db':>6}")
            for _ in range(args.rounds):
                for name in ("bare", "console"):
                    row = load(ports[name], lua, args.clients, args.seconds, CpuMeter(servers[name].pid, args.db))
                    rows[name].append(row)
                    print(_line(name, row), f"| load average {os.getloadavg()[0]:.1f}")
        finally:
            for server in servers.values():
                os.killpg(server.pid, signal.SIGTERM)
                server.wait(timeout=30)
    report(rows)
    queries = queries_per_verdict(key)
    print(f"in process: {len(queries)} queries per verdict")
    for sql in queries:
        print(f"  {sql[:110]}")
    wall, cpu = throttle_cost(key)
    print(f"runtime throttle at {settings.KINDGI_RUNTIME_RATE}: {wall:.0f} us wall, {cpu:.0f} us CPU per request")


def _line(name: str, row: dict[str, float]) -> str:
    return (
        f"{name:>8} {row['rps']:>8.0f} {row['p50']:>8.1f} {row['p99']:>8.1f} |"
        f" {'':>19} {row['app'] * 1e3:>6.2f} {row['db'] * 1e3:>6.2f}"
    )


def report(rows: dict[str, list[dict[str, float]]]) -> None:
    median = {name: {k: statistics.median(r[k] for r in runs) for k in runs[0]} for name, runs in rows.items()}
    print("median of the loads:")
    for name in ("bare", "console"):
        print(_line(name, median[name]))
    bare, console = median["bare"], median["console"]
    rps = console["rps"] / bare["rps"]
    p50 = console["p50"] / bare["p50"]
    cpu = (bare["app"] + bare["db"]) / (console["app"] + console["db"])
    pairs = [c["rps"] / b["rps"] for b, c in zip(rows["bare"], rows["console"], strict=True)]
    print(
        f"console/bare: req/s {rps:.2f}x (target at least {TARGET_RPS}x; per round "
        f"{', '.join(f'{pair:.2f}' for pair in pairs)}), p50 {p50:.2f}x (target at most {TARGET_P50}x), "
        f"p99 {console['p99'] / bare['p99']:.2f}x; by CPU per request (app + db) {cpu:.2f}x"
    )


if __name__ == "__main__":
    main()
