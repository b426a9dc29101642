"""The synchronous verdict, `POST /api/v1/evaluate`, under gunicorn, measured with wrk.

    python bench/evaluate_api.py [--workers 3] [--clients 16] [--seconds 20]

Needs wrk (Debian: `apt-get install -y wrk`). It (re)creates a PostgreSQL database
(BENCH_POSTGRES's server, the database named by --db), enables the seven example
guardrails, issues an evaluate key, serves the console with gunicorn (DEBUG off, `--workers`
sync workers), and drives it with wrk: each request stores a new trace (a fresh id per
request, from a Lua script) and answers the verdict with its results. It prints
requests/s and the p50/p95/p99 latencies that wrk measured, for one client alone and for
`--clients` concurrent clients, against the targets of issue 18 (at least 3 x 114 req/s,
p99 under 60 ms at 16 clients). Prints, never asserts.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.common import free_port  # noqa: E402
from bench.evaluation_run import setup_django  # noqa: E402
from bench.guardrail_ci import make_trace  # noqa: E402  (the CI bench's realistic turns)

BASELINE_RPS, TARGET_P99_MS = 114.0, 60.0

LUA = r"""
local counter = 0
local threads = 0
-- Each thread's ids are its own and each run's are new (an unseeded math.random gave every
-- thread and run the same prefix: repeated ids, answered as duplicates or waiting on each other).
function setup(thread)
  threads = threads + 1
  thread:set("tid", threads)
end
local prefix = nil
local first, rest = "__FIRST__", "__REST__"
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Authorization"] = "Bearer __KEY__"
request = function()
  prefix = prefix or string.format("%x-%d", os.time(), tid or 0)
  counter = counter + 1
  return wrk.format(nil, "/api/v1/evaluate", nil, first .. prefix .. "-" .. counter .. rest)
end
response = function(status, headers, body)
  if status ~= 200 then io.stderr:write("status " .. status .. ": " .. body:sub(1, 200) .. "\n") end
end
done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format("RESULT %d %d %.3f %.3f %.3f %d\n", summary.requests, summary.duration,
    latency:percentile(50) / 1000, latency:percentile(95) / 1000, latency:percentile(99) / 1000,
    e.status + e.connect + e.read + e.write + e.timeout))
  io.write(string.format("ERRORS status %d connect %d read %d write %d timeout %d\n", e.status, e.connect,
    e.read, e.write, e.timeout))
end
"""


def arrange() -> str:
    """The example guardrails, enabled; an evaluate key of acme. Returns the key."""
    import orjson

    from guardrails.services import Author, save_guardrail
    from kindgi_console.tenancy.models import ApiKey, Tenant

    acme = Tenant.objects.create(slug="acme", name="Acme")
    for path in sorted((ROOT / "examples" / "guardrails").glob("*.json")):
        save_guardrail(orjson.loads(path.read_bytes()), Author(user=None, label="bench"), enabled=True)
    return ApiKey.issue(scopes=["evaluate"], tenant=acme, name="bench")[1]


def script(folder: Path, key: str) -> Path:
    trace = make_trace(1, random.Random(18))
    trace["id"] = "ID"
    body = json.dumps(trace, separators=(",", ":"))
    first, rest = body.split('"ID"')
    lua = (LUA.replace("__FIRST__", (first + '"bench-').replace('"', '\\"'))
           .replace("__REST__", ('"' + rest).replace('"', '\\"')).replace("__KEY__", key))
    path = folder / "evaluate.lua"
    path.write_text(lua)
    return path


def serve(port: int, workers: int, url: str, log: Path) -> subprocess.Popen[bytes]:
    env = {**os.environ, "DATABASE_URL": url, "DJANGO_DEBUG": "false", "DJANGO_SECRET_KEY": "bench-only-not-secret",
           "DJANGO_SECURE_SSL_REDIRECT": "false", "DJANGO_ALLOWED_HOSTS": "127.0.0.1",
           "KINDGI_API_RATE": "100000000/minute", "KINDGI_LOG_LEVEL": "WARNING"}
    server = subprocess.Popen(
        [sys.executable, "-m", "gunicorn", "kindgi_console.wsgi:application", "--workers", str(workers),
         "--bind", f"127.0.0.1:{port}", "--log-level", "warning", "--preload"],
        cwd=ROOT, env=env, stdout=log.open("wb"), stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return server
        except OSError:
            time.sleep(0.2)
    os.killpg(server.pid, signal.SIGKILL)
    raise SystemExit(f"gunicorn did not start:\n{log.read_text()}")


def load(port: int, lua: Path, clients: int, seconds: int) -> dict[str, float]:
    threads = max(1, min(clients, 2))
    done = subprocess.run(
        ["wrk", "-t", str(threads), "-c", str(clients), "-d", f"{seconds}s", "--timeout", "10s", "-s", str(lua),
         f"http://127.0.0.1:{port}"], capture_output=True, text=True, check=False)
    found = re.search(r"RESULT (\d+) (\d+) ([\d.]+) ([\d.]+) ([\d.]+) (\d+)", done.stdout)
    if found is None:
        raise SystemExit(f"wrk failed:\n{done.stdout}\n{done.stderr}")
    requests, micros, p50, p95, p99, errors = found.groups()
    if int(errors):
        kinds = re.search(r"ERRORS (.*)", done.stdout)
        print(f"  {errors} requests failed ({kinds.group(1) if kinds else ''}) {done.stderr[:300]}")
    return {"rps": int(requests) / (int(micros) / 1e6), "p50": float(p50), "p95": float(p95),
            "p99": float(p99)}


def in_process(key: str, requests: int = 200) -> tuple[float, float]:
    """Wall and CPU milliseconds per request of the view in this process (Django's test
    client, no socket): the application's own cost, whatever the load on the machine."""
    from django.test import Client

    client = Client(HTTP_AUTHORIZATION=f"Bearer {key}")
    trace = make_trace(2, random.Random(18))

    def post(n: int) -> None:
        answer = client.post("/api/v1/evaluate", json.dumps({**trace, "id": f"in-process-{n}"}),
                             content_type="application/json")
        assert answer.status_code == 200, answer.content[:300]

    for n in range(20):
        post(n)
    wall, cpu = time.perf_counter(), time.process_time()
    for n in range(20, 20 + requests):
        post(n)
    return (time.perf_counter() - wall) * 1000 / requests, (time.process_time() - cpu) * 1000 / requests


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=3)
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--seconds", type=int, default=20)
    parser.add_argument("--db", default="kindgi_evalapi_bench")
    args = parser.parse_args()
    if shutil.which("wrk") is None:
        raise SystemExit("wrk is needed: apt-get install -y wrk")
    os.environ.update({"DJANGO_SECURE_SSL_REDIRECT": "false", "KINDGI_API_RATE": "100000000/minute"})
    url = setup_django(args.db)
    key = arrange()
    port = free_port()
    with tempfile.TemporaryDirectory(prefix="kindgi-bench-") as tmp:
        lua = script(Path(tmp), key)
        server = serve(port, args.workers, url, Path(tmp) / "gunicorn.log")
        try:
            load(port, lua, args.clients, 10)  # warm-up: every worker has its connection and engine
            alone = load(port, lua, 1, max(5, args.seconds // 2))
            busy = load(port, lua, args.clients, args.seconds)
        finally:
            os.killpg(server.pid, signal.SIGTERM)
            server.wait(timeout=30)
    print(f"POST /api/v1/evaluate, 7 guardrails, trace stored; gunicorn {args.workers} workers; wrk")
    print(f"{'clients':>8} {'req/s':>8} {'p50 ms':>8} {'p95 ms':>8} {'p99 ms':>8}")
    for clients, row in ((1, alone), (args.clients, busy)):
        print(f"{clients:>8} {row['rps']:>8.0f} {row['p50']:>8.1f} {row['p95']:>8.1f} {row['p99']:>8.1f}")
    wall, cpu = in_process(key)
    print(f"in process (no socket): {wall:.1f} ms wall, {cpu:.1f} ms CPU of the application per request")
    print(f"at {args.clients} clients: {busy['rps'] / BASELINE_RPS:.2f}x the {BASELINE_RPS:.0f} req/s of "
          f"issue 18 (target 3x), p99 {busy['p99']:.0f} ms (target under {TARGET_P99_MS:.0f} ms)")


if __name__ == "__main__":
    main()
