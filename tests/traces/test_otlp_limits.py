"""OTLP at its limits: what one export may cost the database and the web server.

- Locks: an export holds at most `turns.TRACE_LOCKS` locks whatever its number of traces, so an
  export of 16,000 traces no longer fills PostgreSQL's shared lock table (which made other
  databases' transactions on the server fail with "out of shared memory").
- Time: a span's agent (an incomplete turn's awaited span) is found in one walk of the spans,
  chains and parent cycles alike, and the request stops at KINDGI_REQUEST_TIME_LIMIT_S.
- Both at once, as a deployment runs it: gunicorn with one gthread worker of one thread takes
  the 16,000-trace and the 50,000-span exports while another database on the same PostgreSQL
  server commits transactions in a thread.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
from django.db import OperationalError, connection, transaction
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span as ProtoSpan
from psycopg import sql

from tests.traces import workers
from tests.traces.otlp_turn import OTLP_PATH
from traces.ingest.otlp import mapping, turns
from traces.ingest.otlp.spans import Span
from traces.models import PendingSpan, RunTrace

PROTOBUF = "application/x-protobuf"
on_postgresql = pytest.mark.postgresql("PostgreSQL's lock table")
ROOT = Path(__file__).resolve().parents[2]


def span(n: int, parent: int | None, name: str = "step", trace: str = "a" * 32) -> Span:
    return Span(
        trace_id=trace,
        span_id=f"{n:016x}",
        parent_id=f"{parent:016x}" if parent is not None else "",
        name=name,
        start_ns=n + 1,
        end_ns=n + 2,
    )


def agent_chain(count: int) -> list[Span]:
    """An agent span (span 1) and `count - 1` spans under it, each the parent of the next."""
    return [span(1, None, "invoke_agent bot"), *(span(n, n - 1) for n in range(2, count + 1))]


def agent_and_cycle(count: int) -> list[Span]:
    """An agent span, and `count - 1` spans each the parent of the next, the last the first's."""
    last = count
    return [span(1, None, "invoke_agent bot"), *(span(n, n - 1 if n > 2 else last) for n in range(2, count + 1))]


# ------------------------------------------------------------------ the walk is linear


class Counted:
    """`turns.is_agent`, counting its calls: one a span is linear work, one a step quadratic."""

    def __init__(self) -> None:
        self.calls = 0
        self.real = mapping.is_agent

    def __call__(self, span: Span) -> bool:
        self.calls += 1
        return self.real(span)


@pytest.mark.parametrize(
    ("spans", "in_turn"), [(agent_chain(3_000), 3_000), (agent_and_cycle(3_000), 1)], ids=["chain", "cycle"]
)
def test_each_spans_agent_is_found_with_work_linear_in_the_spans(
    spans: list[Span], in_turn: int, monkeypatch: Any
) -> None:
    counted = Counted()
    monkeypatch.setattr(turns, "is_agent", counted)

    finished, leftover = turns.split(spans)

    assert counted.calls <= 2 * len(spans)  # was one a step up the parents: millions here
    [turn] = finished
    assert turn.head is spans[0]
    assert len(turn.spans) == in_turn  # a cycle is under no agent: dropped, the root has come
    assert leftover == []


def test_fifty_thousand_spans_are_walked_in_seconds() -> None:
    """Chains and cycles of 50,000 spans, to turns and to incomplete turns (the periodic task's
    walk): each took minutes when every span walked up its parents."""
    started = time.monotonic()
    [chain_turn], _ = turns.split(agent_chain(50_000))
    [cycle_turn], _ = turns.split(agent_and_cycle(50_000))
    generative = [span(n, n - 1 if n > 1 else None, "chat m") for n in range(1, 50_001)][1:]  # span 1 never came
    [waiting] = turns.incomplete_turns(generative)
    ring = [span(n, n % 50_000 + 1, "chat m") for n in range(1, 50_001)]  # 50,000 is the parent of 1
    [round_turn] = turns.incomplete_turns(ring)
    elapsed = time.monotonic() - started

    assert len(chain_turn.spans) == 50_000 and len(cycle_turn.spans) == 1
    assert waiting.turn_id == "a" * 32 + "-" + f"{1:016x}" and len(waiting.spans) == 49_999
    assert round_turn.turn_id == "a" * 32 + "-" + f"{1:016x}" and len(round_turn.spans) == 50_000  # its least id
    assert elapsed < 10  # about a second; quadratic, it was hours


def test_a_turn_is_the_same_whatever_the_order_its_spans_come_in() -> None:
    """Agents nest: each span belongs to its nearest agent, found from anywhere in the walk."""
    spans = [
        span(1, None, "invoke_agent outer"),
        span(2, 1),
        span(3, 2, "invoke_agent inner"),
        span(4, 3),
        span(5, 4),
        span(6, 2),
        span(7, 99),  # its parent is not known: waits, or is dropped once the root came
    ]
    for ordered in (spans, spans[::-1], spans[3:] + spans[:3]):
        finished, leftover = turns.split(ordered)
        members = {turn.head.span_id: sorted(s.span_id for s in turn.spans) for turn in finished if turn.head}
        assert members == {f"{1:016x}": [f"{n:016x}" for n in (1, 2, 6)], f"{3:016x}": [f"{n:016x}" for n in (3, 4, 5)]}
        assert leftover == []
    finished, leftover = turns.split(spans[1:])  # the root has not come: what is under no agent waits
    assert [turn.head.span_id for turn in finished if turn.head] == [f"{3:016x}"]
    assert sorted(s.span_id for s in leftover) == [f"{n:016x}" for n in (2, 6, 7)]


# ------------------------------------------------------------------ the locks are bounded


def trace_ids(count: int) -> list[str]:
    return [f"{n:032x}" for n in range(1, count + 1)]


@on_postgresql
def test_an_export_of_sixteen_thousand_traces_holds_a_bounded_number_of_locks(acme: Any) -> None:
    with transaction.atomic():
        turns._lock_traces(acme, trace_ids(16_000))
        with connection.cursor() as cursor:
            cursor.execute("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid()")
            (held,) = cursor.fetchone()
    assert 0 < held <= turns.TRACE_LOCKS


@on_postgresql
@pytest.mark.django_db(transaction=True)
def test_an_export_waits_only_for_the_exports_of_its_own_trace_locks(acme: Any) -> None:
    """Another transaction holds one trace's lock: an export of a trace of that group waits
    for it; an export of a trace of another group does not."""
    held, other = trace_ids(200)[0], None
    for candidate in trace_ids(200)[1:]:
        if turns.lock_group(candidate) != turns.lock_group(held):
            other = candidate
            break
    assert other is not None
    with psycopg.connect(workers.test_database_url()) as holder:
        holder.execute(
            "SELECT pg_advisory_xact_lock(hashtextextended('otlp/' || %s || '/' || %s, 0))",
            [str(acme.pk), turns.lock_group(held)],
        )
        with transaction.atomic():
            with connection.cursor() as cursor:
                cursor.execute("SET LOCAL lock_timeout = '300ms'")
            turns._lock_traces(acme, [other])  # another group: at once
        with pytest.raises(OperationalError, match="lock timeout"), transaction.atomic():
            with connection.cursor() as cursor:
                cursor.execute("SET LOCAL lock_timeout = '300ms'")
            turns._lock_traces(acme, [other, held])
        holder.rollback()


# ------------------------------------------------------------------ both, under gunicorn


def sixteen_thousand_traces() -> bytes:
    """16,000 model calls, each in a trace of its own under an agent span still running: 16,000
    traces locked, 16,000 spans kept waiting for their turns' heads."""
    request = ExportTraceServiceRequest()
    resource_spans = request.resource_spans.add()
    resource_spans.resource.attributes.append(KeyValue(key="service.name", value=AnyValue(string_value="bot")))
    spans = resource_spans.scope_spans.add().spans
    spans.extend(
        ProtoSpan(
            trace_id=n.to_bytes(16, "big"),
            span_id=(2 * n + 1).to_bytes(8, "big"),
            parent_span_id=(2 * n).to_bytes(8, "big"),
            name="chat m",
            start_time_unix_nano=1_764_410_400_000_000_000 + n,
            end_time_unix_nano=1_764_410_400_000_000_000 + n + 1,
        )
        for n in range(1, 16_001)
    )
    return request.SerializeToString()


CHAIN_TRACE, CYCLE_TRACE = (100_001).to_bytes(16, "big"), (100_002).to_bytes(16, "big")  # none of the 16,000


def fifty_thousand_spans() -> bytes:
    """Two traces of 25,000 spans: an agent span over a chain of 24,999, and an agent span
    beside 24,999 spans whose parents go round a cycle."""
    request = ExportTraceServiceRequest()
    spans = request.resource_spans.add().scope_spans.add().spans
    for trace_id, parents in (
        (CHAIN_TRACE, {n: n - 1 for n in range(2, 25_001)}),
        (CYCLE_TRACE, {n: n - 1 if n > 2 else 25_000 for n in range(2, 25_001)}),
    ):
        spans.append(ProtoSpan(trace_id=trace_id, span_id=(1).to_bytes(8, "big"), name="invoke_agent bot"))
        spans.extend(
            ProtoSpan(
                trace_id=trace_id, span_id=n.to_bytes(8, "big"), parent_span_id=parent.to_bytes(8, "big"), name="step"
            )
            for n, parent in parents.items()
        )
    return request.SerializeToString()


@dataclass
class Neighbour:
    """Another database on the same server, committing small transactions as fast as it can,
    each needing room in the server's shared lock table (a transaction id, an advisory lock)."""

    url: str
    commits: int = 0
    failures: list[str] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)

    def run(self) -> None:
        with psycopg.connect(self.url, autocommit=True) as db:
            db.execute("CREATE TABLE IF NOT EXISTS beat (n bigint, at timestamptz DEFAULT now())")
            n = 0
            while not self.stop.is_set():
                n += 1
                try:
                    with db.transaction():
                        db.execute("INSERT INTO beat (n) VALUES (%s)", [n])
                        db.execute("SELECT pg_advisory_xact_lock(%s)", [n])
                    self.commits += 1
                except psycopg.Error as error:
                    self.failures.append(str(error).strip())
                time.sleep(0.002)


@pytest.fixture
def neighbour() -> Iterator[Neighbour]:
    database = f"{connection.settings_dict['NAME']}_neighbour"
    server = workers.test_database_url().rsplit("/", 1)[0]
    with psycopg.connect(f"{server}/postgres", autocommit=True) as admin:
        admin.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(database)))
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(database)))
    beside = Neighbour(f"{server}/{database}")
    thread = threading.Thread(target=beside.run, daemon=True)
    thread.start()
    try:
        workers.wait_for(lambda: beside.commits > 0 or bool(beside.failures), 30, "the neighbour's first commit")
        yield beside
    finally:
        beside.stop.set()
        thread.join(10)
        with psycopg.connect(f"{server}/postgres", autocommit=True) as admin:
            admin.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(database)))


#: The deadline the web server runs with here (its default is 30 s).
LIMIT_S = 20


@pytest.fixture
def web(tmp_path: Path) -> Iterator[str]:
    """gunicorn as the README deploys it, on the test database: one gthread worker, one thread."""
    port = workers.free_port()
    environ = {
        **os.environ,
        "DATABASE_URL": workers.test_database_url(),
        "CELERY_TASK_ALWAYS_EAGER": "true",
        "KINDGI_VAR_DIR": str(tmp_path / "var"),
        "KINDGI_REQUEST_TIME_LIMIT_S": str(LIMIT_S),
        "KINDGI_API_RATE": "1000/minute",
        "KINDGI_OTLP_MAX_PENDING_SPANS": "20000",
    }
    command = [
        str(Path(sys.executable).parent / "gunicorn"),
        "kindgi_console.wsgi:application",
        f"--bind=127.0.0.1:{port}",
        "--workers=1",
        "--worker-class=gthread",
        "--threads=1",
        "--timeout=60",
        "--graceful-timeout=5",
    ]
    with (tmp_path / "gunicorn.log").open("wb") as log:
        process = subprocess.Popen(command, cwd=ROOT, env=environ, stdout=log, stderr=subprocess.STDOUT)
    with workers.serving(process, port, 60, "gunicorn to listen"):
        base = f"http://127.0.0.1:{port}"
        assert httpx.get(f"{base}/api/v1/traces", timeout=60).status_code == 401  # the worker has loaded the URLs
        yield base


@dataclass
class Sent:
    status: int = 0
    body: bytes = b""
    seconds: float = 0.0


def export(base: str, key: str, body: bytes) -> Sent:
    started = time.monotonic()
    response = httpx.post(
        base + OTLP_PATH,
        content=body,
        headers={"Content-Type": PROTOBUF, "Authorization": f"Bearer {key}"},
        timeout=LIMIT_S + 40,
    )
    return Sent(response.status_code, response.content, time.monotonic() - started)


def while_probing(base: str, key: str, body: bytes) -> tuple[Sent, float]:
    """Send an export and, while it is served, a small request behind it: the export's answer,
    and the seconds from sending the export to the small request's answer."""
    sent = Sent()

    def send() -> None:
        nonlocal sent
        sent = export(base, key, body)

    started = time.monotonic()
    exporting = threading.Thread(target=send)
    exporting.start()
    time.sleep(0.5)
    probe = httpx.get(f"{base}/api/v1/traces?limit=1", headers={"Authorization": f"Bearer {key}"}, timeout=LIMIT_S + 40)
    freed = time.monotonic() - started
    exporting.join(LIMIT_S + 40)
    assert probe.status_code == 200, probe.text
    return sent, freed


def rejected(body: bytes) -> ExportTraceServiceResponse:
    answer = ExportTraceServiceResponse()
    answer.ParseFromString(body)
    return answer


@on_postgresql
@pytest.mark.django_db(transaction=True)
def test_the_largest_exports_leave_the_database_and_the_web_worker_to_everyone_else(
    acme: Any, acme_key: str, neighbour: Neighbour, web: str
) -> None:
    """16,000 traces at once: kept, with at most TRACE_LOCKS locks, and every transaction of
    the neighbouring database commits. 50,000 spans in a chain and a cycle: answered (stored,
    or refused whole at the deadline) and the worker free again, within the deadline."""
    many, freed = while_probing(web, acme_key, sixteen_thousand_traces())
    assert many.status == 200, many.body[:500]
    assert not rejected(many.body).HasField("partial_success")
    assert PendingSpan.objects.count() == 16_000
    assert freed < LIMIT_S + 5

    before = RunTrace.objects.count()
    deep, freed = while_probing(web, acme_key, fifty_thousand_spans())
    assert deep.status in (200, 503), deep.body[:500]
    assert deep.seconds < LIMIT_S + 5
    assert freed < LIMIT_S + 5
    if deep.status == 200:  # the chain's turn and the cycle's agent span alone (the cycle is under no agent)
        assert RunTrace.objects.count() == before + 2
        chain = RunTrace.objects.get(trace_id=f"{CHAIN_TRACE.hex()}-{1:016x}")
        assert len(chain.document["metadata"]["otlp"]["spanIds"]) == 25_000
    else:  # refused whole at the deadline
        assert b"KINDGI_REQUEST_TIME_LIMIT_S" in deep.body
        assert RunTrace.objects.count() == before
    assert PendingSpan.objects.count() == 16_000  # the first export's, as they were

    assert neighbour.failures == []
    assert neighbour.commits > 0
