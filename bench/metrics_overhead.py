"""What the metrics and the request middleware cost `POST evaluate`, side by side.

    .venv/bin/python bench/metrics_overhead.py [--requests 2000] [--rounds 3]

It (re)creates a PostgreSQL database (BENCH_POSTGRES's server, database
kindgi_bench_metrics), registers the seven example guardrails, and times the same
`POST /api/v1/evaluate?store=false` in this process (Django's test client, so no socket
and no server in the way) with the console as it is (`ObserveRequests` first, every
verdict and evaluation counted in prometheus-client's multi-process files) and with both
taken out, rounds interleaved (which goes first alternates). Prints the CPU time of a request each way (the best round)
and their ratio; asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.common import setup_django  # noqa: E402

TRACE = {
    "agent": "support-bot",
    "flow": "refund",
    "input": "Can I get a refund for order 1234?",
    "output": "Yes: orders can be refunded within 30 days [policy-refunds].",
    "toolCalls": [{"name": "lookup_order", "arguments": {"order": "1234"}}],
}


def timed(client: Any, key: str, requests: int) -> float:
    """CPU seconds per request over `requests` verdicts."""
    headers = {"HTTP_AUTHORIZATION": f"Bearer {key}"}
    body = json.dumps({**TRACE, "id": "bench"})
    started = time.process_time()
    for _ in range(requests):
        answer = client.post("/api/v1/evaluate?store=false", body, content_type="application/json", **headers)
        assert answer.status_code == 200, answer.content[:300]
    return (time.process_time() - started) / requests


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    setup_django("kindgi_bench_metrics")
    from django.conf import settings
    from django.test import Client

    from kindgi_console import instruments
    from kindgi_console.tenancy.models import ApiKey, Tenant

    acme = Tenant.objects.create(slug="acme")
    key = ApiKey.issue(scopes=["evaluate", "read"], tenant=acme)[1]
    author = Client(HTTP_AUTHORIZATION=f"Bearer {ApiKey.issue(scopes=['author', 'read'])[1]}")
    for path in sorted((ROOT / "examples" / "guardrails").glob("*.json")):
        answer = author.post("/api/v1/guardrails", path.read_bytes(), content_type="application/json")
        assert answer.status_code == 201, answer.content[:300]
    counting = (instruments.count_verdict, instruments.count_evaluations)
    whole = list(settings.MIDDLEWARE)
    bare = [m for m in whole if m != "kindgi_console.logs.ObserveRequests"]
    on: list[float] = []
    off: list[float] = []

    def without_metrics() -> float:
        instruments.count_verdict = instruments.count_evaluations = lambda *a, **k: None  # type: ignore[assignment]
        settings.MIDDLEWARE = bare  # read when the client's handler loads (override_settings slows every read)
        try:
            return timed(Client(), key, args.requests)
        finally:
            settings.MIDDLEWARE = whole
            instruments.count_verdict, instruments.count_evaluations = counting

    for round_ in range(args.rounds):  # which goes first alternates, so that warming up favours neither
        if round_ % 2:
            off.append(without_metrics())
        on.append(timed(Client(), key, args.requests))
        if not round_ % 2:
            off.append(without_metrics())
    with_metrics, without = min(on), min(off)
    print(f"POST evaluate, {args.requests} requests x {args.rounds} rounds, 7 guardrails, CPU time per request:")
    print(f"  with metrics and request logging  {with_metrics * 1e6:8.0f} us")
    print(f"  without                           {without * 1e6:8.0f} us")
    print(f"  ratio with/without                {with_metrics / without:8.3f}")


if __name__ == "__main__":
    main()
