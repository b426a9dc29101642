"""OTLP ingestion rate against `POST /api/v1/traces` for the same agent turns, on PostgreSQL.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/kindgi_bench python bench/otlp.py

Records agent turns with the OpenTelemetry SDK (each an `invoke_agent` span over two chats
and three tool calls, as in tests/traces/otlp_turn.py), then starts the console
(`manage.py runserver`, DEBUG off) and sends the same turns both ways over a real socket:
as OTLP/HTTP protobuf exports of `--turns-per-export` turns (the SDK's own encoder, as its
batch processor would send them), and as REST batches of the RunTraces those turns become.
Each way writes to a tenant of its own. Prints both rates in turns per second and their
ratio; the target is OTLP at least 0.5 times REST. The rounds alternate, so that the noise
of a shared machine falls on both.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import orjson

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "kindgi_console.settings")

from bench.ingest import free_port, start_server  # noqa: E402


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


def prepare_database() -> tuple[str, str, str, str]:
    """Migrate; two fresh tenants (REST, OTLP), each with an ingest key."""
    import django

    django.setup()
    from django.core.management import call_command

    from kindgi_console.tenancy.models import ApiKey, Tenant

    call_command("migrate", verbosity=0)
    stamp = time.strftime("%Y%m%d%H%M%S")
    rest = Tenant.objects.create(slug=f"bench-rest-{stamp}")
    otlp = Tenant.objects.create(slug=f"bench-otlp-{stamp}")
    rest_key = ApiKey.issue(scopes=["ingest"], tenant=rest, name="bench")[1]
    otlp_key = ApiKey.issue(scopes=["ingest"], tenant=otlp, name="bench")[1]
    return rest_key, otlp_key, rest.slug, otlp.slug


def bodies(turns: list[Any], per_request: int) -> tuple[list[bytes], list[bytes]]:
    """The same turns as OTLP protobuf exports and as REST batches, `per_request` turns each."""
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

    from tests.traces.otlp_turn import expected_document

    otlp, rest = [], []
    for start in range(0, len(turns), per_request):
        group = turns[start:start + per_request]
        otlp.append(encode_spans([span for turn in group for span in turn]).SerializeToString())
        documents = [expected_document(turn) for turn in group]
        for document in documents:
            del document["tenant"]
        rest.append(orjson.dumps({"traces": documents}))
    return otlp, rest


def send(client: httpx.Client, url: str, key: str, content_type: str, body: bytes, expected: int) -> float:
    started = time.perf_counter()
    response = client.post(url, content=body, headers={"Authorization": f"Bearer {key}",
                                                        "Content-Type": content_type})
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
    rest_key, otlp_key, rest_tenant, otlp_tenant = prepare_database()
    logging.getLogger("httpx").setLevel(logging.WARNING)
    otlp_bodies, rest_bodies = bodies(record_turns(args.turns), args.turns_per_export)
    port = free_port()
    server = start_server(port)
    base = f"http://127.0.0.1:{port}/api/v1"
    timings = {"rest": 0.0, "otlp": 0.0}
    try:
        with httpx.Client(timeout=120) as client:
            for otlp_body, rest_body in zip(otlp_bodies, rest_bodies, strict=True):
                timings["rest"] += send(client, f"{base}/traces", rest_key, "application/json", rest_body, 207)
                timings["otlp"] += send(client, f"{base}/otlp/v1/traces", otlp_key, "application/x-protobuf",
                                        otlp_body, 200)
    finally:
        server.terminate()
        server.wait(timeout=10)
    check_stored(otlp_tenant, args.turns)
    rest, otlp = args.turns / timings["rest"], args.turns / timings["otlp"]
    print(f"turns:            {args.turns}, {args.turns_per_export} per request (6 spans a turn)")
    print(f"REST ingestion:   {rest:8.0f} turns/s  (tenant {rest_tenant})")
    print(f"OTLP ingestion:   {otlp:8.0f} turns/s  (tenant {otlp_tenant})")
    print(f"ratio OTLP/REST:  {otlp / rest:8.2f}  (target: at least 0.5)")


def check_stored(tenant_slug: str, expected: int) -> None:
    from traces.models import RunTrace

    stored = RunTrace.objects.filter(tenant__slug=tenant_slug).count()
    if stored != expected:
        raise SystemExit(f"OTLP stored {stored} turns, not {expected}")


if __name__ == "__main__":
    main()
