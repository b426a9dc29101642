"""OTLP ingestion rate against `POST /api/v1/traces` for the same agent turns, on PostgreSQL.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/kindgi_bench python bench/otlp.py

Records agent turns with the OpenTelemetry SDK (each an `invoke_agent` span over two chats
and three tool calls, as in tests/traces/otlp_turn.py), then starts the console
(the README's gunicorn command, DEBUG off) and sends the same turns both ways over a real socket:
as OTLP/HTTP protobuf exports of `--turns-per-export` turns (the SDK's own encoder, as its
batch processor would send them), and as REST batches of the RunTraces those turns become.
A third way sends each turn over two exports (its first three spans, then the rest, the agent
span last), so that half of every turn waits in the database first. Each way writes to a
tenant of its own. Prints the rates in turns per second and their ratios to REST; the target
is OTLP at least 0.5 times REST. The rounds alternate, so that the noise
of a shared machine falls on both.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import orjson

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "kindgi_console.settings")

from bench.common import free_port  # noqa: E402
from bench.ingest import start_server  # noqa: E402


def record_turns(count: int) -> list[Any]:
    """`count` turns recorded with the SDK, each as its tuple of finished spans."""
    from tests.traces.otlp_turn import Recorder, record_agent_turn

    recorder = Recorder()
    turns = []
    for _ in range(count):
        recorder.memory.clear()
        record_agent_turn(recorder)
        turns.append(recorder.spans)
    return turns


def prepare_database() -> dict[str, tuple[str, str]]:
    """Migrate; a fresh tenant for each way (REST, OTLP, OTLP split), each with an ingest key."""
    import django

    django.setup()
    from django.core.management import call_command

    from kindgi_console.tenancy.models import ApiKey, Tenant

    call_command("migrate", verbosity=0)
    stamp = time.strftime("%Y%m%d%H%M%S")
    ways = {}
    for way in WAYS:
        tenant = Tenant.objects.create(slug=f"bench-{way}-{stamp}")
        ways[way] = (ApiKey.issue(scopes=["ingest"], tenant=tenant, name="bench")[1], tenant.slug)
    return ways


WAYS = ("rest", "otlp", "split")


def bodies(turns: list[Any], per_request: int) -> dict[str, list[list[bytes]]]:
    """The same turns, `per_request` a request, for each way: each step a list of bodies."""
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

    from tests.traces.otlp_turn import expected_document

    ways: dict[str, list[list[bytes]]] = {way: [] for way in WAYS}
    for start in range(0, len(turns), per_request):
        group = turns[start : start + per_request]
        ways["otlp"].append([encode_spans([span for turn in group for span in turn]).SerializeToString()])
        ways["split"].append(
            [
                encode_spans([span for turn in group for span in turn[:3]]).SerializeToString(),
                encode_spans([span for turn in group for span in turn[3:]]).SerializeToString(),
            ]
        )
        documents = [expected_document(turn) for turn in group]
        for document in documents:
            del document["tenant"]
        ways["rest"].append([orjson.dumps({"traces": documents})])
    return ways


def send(client: httpx.Client, url: str, key: str, content_type: str, body: bytes, expected: int) -> float:
    started = time.perf_counter()
    response = client.post(url, content=body, headers={"Authorization": f"Bearer {key}", "Content-Type": content_type})
    elapsed = time.perf_counter() - started
    assert response.status_code == expected, response.text[:300]
    if content_type == "application/x-protobuf":
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

        answer = ExportTraceServiceResponse.FromString(response.content)
        assert answer.partial_success.rejected_spans == 0, answer.partial_success.error_message
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=2000)
    parser.add_argument("--turns-per-export", type=int, default=100)
    args = parser.parse_args()
    if not os.environ.get("DATABASE_URL", "").startswith("postgres"):
        raise SystemExit("set DATABASE_URL to a PostgreSQL database (it is migrated, and bench tenants are added)")
    ways = prepare_database()
    logging.getLogger("httpx").setLevel(logging.WARNING)
    steps = bodies(record_turns(args.turns), args.turns_per_export)
    port = free_port()
    folder = tempfile.TemporaryDirectory()
    server = start_server(port, Path(folder.name))
    base = f"http://127.0.0.1:{port}/api/v1"
    timings = dict.fromkeys(WAYS, 0.0)
    try:
        with httpx.Client(timeout=120) as client:
            for step in range(len(steps["rest"])):
                for way in WAYS:
                    key = ways[way][0]
                    for body in steps[way][step]:
                        if way == "rest":
                            timings[way] += send(client, f"{base}/traces", key, "application/json", body, 207)
                        else:
                            timings[way] += send(
                                client, f"{base}/otlp/v1/traces", key, "application/x-protobuf", body, 200
                            )
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=20)
        folder.cleanup()
    for way in ("otlp", "split"):
        check_stored(ways[way][1], args.turns)
    rate = {way: args.turns / timings[way] for way in WAYS}
    print(f"turns:                   {args.turns}, {args.turns_per_export} per request (6 spans a turn)")
    print(f"REST ingestion:          {rate['rest']:8.0f} turns/s")
    print(
        f"OTLP, whole turns:       {rate['otlp']:8.0f} turns/s   ratio to REST {rate['otlp'] / rate['rest']:.2f}"
        "  (target: at least 0.5)"
    )
    print(
        f"OTLP, turns over 2 exports: {rate['split']:5.0f} turns/s   ratio to REST {rate['split'] / rate['rest']:.2f}"
    )


def check_stored(tenant_slug: str, expected: int) -> None:
    from traces.models import RunTrace

    stored = RunTrace.objects.filter(tenant__slug=tenant_slug).count()
    if stored != expected:
        raise SystemExit(f"OTLP stored {stored} turns, not {expected}")


if __name__ == "__main__":
    main()
