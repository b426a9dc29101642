"""The deadline of the requests that take traces (KINDGI_REQUEST_TIME_LIMIT_S): `POST traces`,
`POST evaluate` and the OTLP export each stop at it, store nothing, and answer 503 naming it.

The deadline is read on a clock the tests move (kindgi_console/deadline.py `_clock`), so that
it passes at a chosen point of the work; the tests on PostgreSQL also hold a lock the request
needs, and its wait ends at the deadline by the database's own `statement_timeout`.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import psycopg
import pytest
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.trace.v1.trace_pb2 import Span as ProtoSpan

from guardrails.services import Author, save_guardrail
from kindgi_console import deadline
from tests.conftest import make_guardrail, make_trace
from tests.traces import workers
from tests.traces.otlp_turn import OTLP_PATH, Recorder, record_agent_turn
from traces.ingest import documents as ingest
from traces.ingest.otlp import turns
from traces.models import EvaluationResult, PendingSpan, RunTrace

PROTOBUF = "application/x-protobuf"
on_postgresql = pytest.mark.postgresql("statement_timeout is PostgreSQL's")


class Clock:
    """A time.monotonic() that moves only when told."""

    def __init__(self) -> None:
        self.now = time.monotonic()

    def __call__(self) -> float:
        return self.now

    def after(self, function: Callable[..., Any], seconds: float) -> Callable[..., Any]:
        """`function`, after each call of which `seconds` have passed."""

        def moved(*args: Any, **kwargs: Any) -> Any:
            result = function(*args, **kwargs)
            self.now += seconds
            return result

        return moved


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch, settings: Any) -> Clock:
    settings.KINDGI_REQUEST_TIME_LIMIT_S = 30
    moving = Clock()
    monkeypatch.setattr(deadline, "_clock", moving)
    return moving


@contextmanager
def held(statement: str, params: Sequence[Any] = (), most_s: float = 8) -> Iterator[None]:
    """Another connection holds a lock (`statement`) while the block runs, and for at most
    `most_s` seconds: a request that waited for it to the end would then go on."""
    taken, done = threading.Event(), threading.Event()

    def hold() -> None:
        with psycopg.connect(workers.test_database_url()) as holder:
            holder.execute(statement, params)
            taken.set()
            done.wait(most_s)
            holder.rollback()

    thread = threading.Thread(target=hold)
    thread.start()
    try:
        assert taken.wait(30), "the lock was not taken"
        yield
    finally:
        done.set()
        thread.join(30)


def assert_past_the_deadline(response: Any, doing: str) -> None:
    assert response.status_code == 503, response.content
    assert response["Retry-After"] == str(deadline.RETRY_AFTER_S)
    [error] = response.json()["errors"]
    assert error["path"] == ""
    assert "its limit of 30 s (KINDGI_REQUEST_TIME_LIMIT_S)" in error["message"]
    assert f"while {doing}" in error["message"]
    assert "nothing was stored" in error["message"]


# ------------------------------------------------------------------ POST /api/v1/traces


def test_ingestion_stops_at_its_deadline_and_stores_none_of_the_batch(
    api: Any, acme_key: str, clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(ingest, "validate", clock.after(ingest.validate, 4))  # 4 s a trace: 30 s at the 8th
    batch = {"traces": [make_trace(f"run-{n}") for n in range(20)]}

    response = api(acme_key).post("/api/v1/traces", data=batch, format="json")

    assert_past_the_deadline(response, "validating the traces")
    assert RunTrace.objects.count() == 0
    assert api(acme_key).post("/api/v1/traces", data=make_trace("later"), format="json").status_code == 201


@on_postgresql
def test_ingestion_waiting_for_a_lock_gives_up_at_its_deadline(api: Any, acme_key: str, settings: Any) -> None:
    settings.KINDGI_REQUEST_TIME_LIMIT_S = 1
    with held(f"LOCK TABLE {RunTrace._meta.db_table} IN SHARE ROW EXCLUSIVE MODE"):  # another writer's
        started = time.monotonic()
        response = api(acme_key).post("/api/v1/traces", data=make_trace("waits"), format="json")
        waited = time.monotonic() - started

    assert response.status_code == 503, response.content
    assert "while storing the traces" in response.json()["errors"][0]["message"]
    assert waited < 6  # the limit is 1 s; the lock is held for 8
    assert RunTrace.objects.count() == 0


# ------------------------------------------------------------------ POST /api/v1/evaluate


@pytest.mark.parametrize("query", ["", "?store=false"])
def test_evaluate_stops_at_its_deadline_before_any_guardrail_and_stores_nothing(
    api: Any, acme_key: str, clock: Clock, monkeypatch: pytest.MonkeyPatch, query: str
) -> None:
    save_guardrail(make_guardrail(), Author(user=None, label="fixture"))
    monkeypatch.setattr(ingest, "validate", clock.after(ingest.validate, 31))

    response = api(acme_key).post(f"/api/v1/evaluate{query}", data=make_trace("slow"), format="json")

    assert_past_the_deadline(response, "reading the trace")
    assert RunTrace.objects.count() == 0
    assert EvaluationResult.objects.count() == 0


def test_evaluates_guardrails_end_by_the_requests_deadline_when_it_comes_first(
    api: Any, acme_key: str, clock: Clock, settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """KINDGI_EVALUATE_TIME_LIMIT_S (60 s here) bounds the guardrails; the request's deadline
    (30 s) comes first, and the guardrails still to be evaluated then are errors with reason
    "deadline": the runtime still gets its verdict."""
    import guardrails.engine.evaluate as engine

    settings.KINDGI_EVALUATE_TIME_LIMIT_S = 60
    for name in ("a-first", "b-second"):
        save_guardrail(make_guardrail(name), Author(user=None, label="fixture"))
    monkeypatch.setattr(engine, "monotonic", clock)
    monkeypatch.setattr(engine, "evaluate_guardrail", clock.after(engine.evaluate_guardrail, 31))

    response = api(acme_key).post("/api/v1/evaluate?store=false", data=make_trace("slow"), format="json")

    assert response.status_code == 200, response.content
    reasons = {result["guardrail"]: result["reason"] for result in response.json()["results"]}
    assert reasons["b-second"] == "deadline"
    assert reasons["a-first"] != "deadline"


# ------------------------------------------------------------------ POST /api/v1/otlp/v1/traces


def turn_and_a_half() -> Any:
    """A finished agent turn, and the first spans of another (waiting for their agent span)."""
    finished, unfinished = Recorder(), Recorder()
    record_agent_turn(finished)
    record_agent_turn(unfinished)
    return encode_spans([*finished.spans, *unfinished.spans[:3]]).SerializeToString()


def test_an_otlp_export_stops_at_its_deadline_and_its_stored_turn_is_rolled_back(
    api: Any, acme_key: str, clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The deadline passes once the finished turn is written, while the other turn's spans are
    being kept: the turn's trace goes with the rest."""
    monkeypatch.setattr(ingest, "store", clock.after(ingest.store, 31))

    response = api(acme_key).post(OTLP_PATH, data=turn_and_a_half(), content_type=PROTOBUF)

    assert response.status_code == 503, response.content
    assert response["Retry-After"] == str(deadline.RETRY_AFTER_S)
    from google.rpc.code_pb2 import Code
    from google.rpc.status_pb2 import Status

    status = Status()
    status.ParseFromString(response.content)
    assert status.code == Code.UNAVAILABLE
    assert "KINDGI_REQUEST_TIME_LIMIT_S" in status.message
    assert "while keeping the spans of unfinished turns" in status.message
    assert RunTrace.objects.count() == 0
    assert PendingSpan.objects.count() == 0


def chain_export(count: int) -> bytes:
    """An agent span and a chain of `count - 1` spans under it, each the parent of the next."""
    request = ExportTraceServiceRequest()
    spans = request.resource_spans.add().scope_spans.add().spans
    trace_id = bytes(range(16))
    spans.append(ProtoSpan(trace_id=trace_id, span_id=(1).to_bytes(8, "big"), name="invoke_agent bot"))
    spans.extend(
        ProtoSpan(
            trace_id=trace_id, span_id=(n + 1).to_bytes(8, "big"), parent_span_id=n.to_bytes(8, "big"), name="step"
        )
        for n in range(1, count)
    )
    return request.SerializeToString()


def test_an_otlp_export_walking_its_spans_stops_at_its_deadline(
    api: Any, acme_key: str, clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_check = deadline.check

    def check(doing: str) -> None:
        if doing == "walking the spans' parents":
            clock.now += 0.01  # 3,000 steps of the walk are 30 s
        real_check(doing)

    monkeypatch.setattr(deadline, "check", check)

    response = api(acme_key).post(OTLP_PATH, data=chain_export(5_000), content_type=PROTOBUF)

    assert response.status_code == 503, response.content
    assert b"while walking the spans' parents" in response.content
    assert RunTrace.objects.count() == 0


@on_postgresql
def test_an_otlp_export_waiting_for_its_traces_lock_gives_up_at_its_deadline(
    api: Any, acme: Any, acme_key: str, settings: Any
) -> None:
    """Another export of the same trace holds its lock (as `turns._lock_traces` takes it)."""
    settings.KINDGI_REQUEST_TIME_LIMIT_S = 1
    recorder = Recorder()
    record_agent_turn(recorder)
    trace_id = format(recorder.spans[0].context.trace_id, "032x")
    lock = "SELECT pg_advisory_xact_lock(hashtextextended('otlp/' || %s || '/' || %s, 0))"
    with held(lock, [str(acme.pk), turns.lock_group(trace_id)]):
        started = time.monotonic()
        response = api(acme_key).post(
            OTLP_PATH, data=encode_spans(recorder.spans).SerializeToString(), content_type=PROTOBUF
        )
        waited = time.monotonic() - started

    assert response.status_code == 503, response.content
    assert b"while storing the spans" in response.content
    assert waited < 6
    assert RunTrace.objects.count() == 0


@pytest.fixture(autouse=True)
def _no_deadline_left_behind() -> Iterator[None]:
    yield
    assert deadline.instant() is None
