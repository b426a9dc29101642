"""The Python client (`kindgi`) against raw httpx, on the same connection to the same console.

    python bench/python_client.py [--verdicts 300] [--traces 4000] [--workers 2]

(Re)creates a PostgreSQL database (BENCH_POSTGRES's server, --db), enables the seven example
guardrails, issues a key, and serves the console with gunicorn as the README's Deploying
section does (bench/evaluate_api.py's command). Then, one request at a time:

- a verdict (`POST /api/v1/evaluate`, a new trace stored each time) through
  `Kindgi.check_output` and through a bare `httpx.Client.post` + `.json()`, alternated, both
  over one shared httpx transport (one connection): the median of each and their ratio
  (issue 28: the client adds at most 10%);
- ingestion: the same traces sent by `Kindgi.ingest()` + `flush()` and by plain `POST traces`
  batches of the same size, one after another: traces/s each and their ratio (at least 0.8).

Prints, never asserts.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from kindgi import Kindgi  # noqa: E402

from bench.common import free_port, setup_django  # noqa: E402
from bench.evaluate_api import GUNICORN_OPTIONS, RATE, serve  # noqa: E402
from bench.guardrail_ci import make_trace  # noqa: E402


def arrange() -> str:
    """The example guardrails, enabled; an evaluate and ingest key of acme. Returns the key."""
    import orjson

    from guardrails.services import Author, save_guardrail
    from kindgi_console.tenancy.models import ApiKey, Tenant

    acme = Tenant.objects.create(slug="acme", name="Acme")
    for path in sorted((ROOT / "examples" / "guardrails").glob("*.json")):
        save_guardrail(orjson.loads(path.read_bytes()), Author(user=None, label="bench"), enabled=True)
    return ApiKey.issue(scopes=["evaluate", "ingest"], tenant=acme, name="bench")[1]


def traces(prefix: str, count: int) -> list[dict[str, Any]]:
    import random

    template = make_trace(1, random.Random(28))
    return [{**template, "id": f"{prefix}-{n}"} for n in range(count)]


def verdicts(base: str, key: str, count: int) -> tuple[float, float]:
    """Median ms of a verdict through the client and through raw httpx, alternated on one connection."""
    transport = httpx.HTTPTransport(limits=httpx.Limits(max_connections=1))
    raw = httpx.Client(base_url=base, transport=transport, headers={"Authorization": f"Bearer {key}"})
    client = Kindgi(base, key, timeout=30, transport=transport)
    timed: dict[str, list[float]] = {"client": [], "raw": []}
    for n, trace in enumerate(traces("verdict", 2 * count + 20)):
        started = time.perf_counter()
        if n % 2:
            answer = raw.post("/api/v1/evaluate", params={"stage": "output"}, json=trace, timeout=30)
            assert answer.status_code == 200 and "turn" in answer.json(), answer.text
            kind = "raw"
        else:
            assert client.check_output(trace).answered
            kind = "client"
        if n >= 20:  # the first ones warm the workers up
            timed[kind].append(time.perf_counter() - started)
    client.close()
    raw.close()
    return statistics.median(timed["client"]) * 1000, statistics.median(timed["raw"]) * 1000


def ingest_rates(base: str, key: str, count: int, batch: int) -> tuple[float, float]:
    """Traces/s stored through `Kindgi.ingest()` and through plain `POST traces` batches."""
    with Kindgi(base, key, batch_size=batch, queue_size=count, ingest_timeout=60) as client:
        started = time.perf_counter()
        for trace in traces("ingest", count):
            client.ingest(trace)
        assert client.flush(timeout=600)
        through_client = count / (time.perf_counter() - started)
        assert client.ingest_stats.sent == count, client.ingest_stats
    bodies = traces("rest", count)
    with httpx.Client(base_url=base, headers={"Authorization": f"Bearer {key}"}) as raw:
        started = time.perf_counter()
        for start in range(0, count, batch):
            answer = raw.post("/api/v1/traces", json={"traces": bodies[start : start + batch]}, timeout=60)
            assert answer.status_code == 207, answer.text
        through_rest = count / (time.perf_counter() - started)
    return through_client, through_rest


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--db", default="kindgi_bench_pyclient")
    parser.add_argument("--verdicts", type=int, default=300, help="verdicts of each kind")
    parser.add_argument("--traces", type=int, default=4000, help="traces ingested each way")
    parser.add_argument("--batch", type=int, default=200)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    os.environ.update({"DJANGO_SECURE_SSL_REDIRECT": "false", "KINDGI_API_RATE": RATE})
    setup_django(args.db)
    logging.getLogger("httpx").setLevel(logging.WARNING)  # Django's config logs every request at INFO
    key = arrange()
    port = free_port()
    with tempfile.TemporaryDirectory() as folder:
        server = serve(port, args.workers, os.environ["DATABASE_URL"], Path(folder) / "gunicorn.log", GUNICORN_OPTIONS)
        try:
            base = f"http://127.0.0.1:{port}"
            client_ms, raw_ms = verdicts(base, key, args.verdicts)
            ingest, rest = ingest_rates(base, key, args.traces, args.batch)
        finally:
            os.killpg(server.pid, signal.SIGTERM)  # gunicorn's session: its master and workers
            server.wait(30)
    print(
        json.dumps(
            {
                "verdict_ms": {"client": round(client_ms, 2), "raw_httpx": round(raw_ms, 2)},
                "verdict_ratio_client_over_raw": round(client_ms / raw_ms, 3),
                "verdict_target": "<= 1.10",
                "ingest_traces_per_s": {"client": round(ingest), "rest": round(rest)},
                "ingest_ratio_client_over_rest": round(ingest / rest, 3),
                "ingest_target": ">= 0.8",
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
