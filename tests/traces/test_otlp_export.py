"""Spans exported by the real OpenTelemetry SDK (protobuf and JSON exporters) to a live console."""

from __future__ import annotations

from typing import Any

import pytest
from opentelemetry.sdk.trace.export import SpanExportResult

from kindgi_console.tenancy.models import ApiKey
from tests.traces.otlp_turn import Recorder, end, expected_document, exporter, hex_ids, parts, record_agent_turn, text
from traces.ingest.otlp.spans import spans_of
from traces.ingest.otlp.turns import complete_waiting
from traces.ingest.tasks import complete_waiting_otlp_turns
from traces.models import PendingSpan, RunTrace, Violation

pytestmark = pytest.mark.django_db(transaction=True)
ENCODINGS = ["protobuf", "json"]


def read_back(api: Any, key: str, trace_id: str) -> dict[str, Any]:
    response = api(key).get(f"/api/v1/traces/{trace_id}")
    assert response.status_code == 200, response.content
    return response.json()["document"]


@pytest.mark.parametrize("encoding", ENCODINGS)
def test_it_stores_a_multi_step_agent_turn_as_the_expected_run_trace(live_server, api, acme_key, encoding):
    recorder = Recorder()
    record_agent_turn(recorder)

    result = exporter(live_server.url, acme_key, encoding).export(recorder.spans)

    assert result is SpanExportResult.SUCCESS
    expected = expected_document(recorder.spans)
    assert read_back(api, acme_key, expected["id"]) == expected


@pytest.mark.parametrize("encoding", ENCODINGS)
def test_it_finishes_a_turn_split_over_two_exports(live_server, api, acme_key, encoding):
    recorder = Recorder()
    record_agent_turn(recorder)
    spans = recorder.spans
    sender = exporter(live_server.url, acme_key, encoding)

    assert sender.export(spans[:3]) is SpanExportResult.SUCCESS
    assert RunTrace.objects.count() == 0
    assert PendingSpan.objects.count() == 3
    assert sender.export(spans[3:]) is SpanExportResult.SUCCESS

    expected = expected_document(spans)
    assert read_back(api, acme_key, expected["id"]) == expected
    assert PendingSpan.objects.count() == 0


@pytest.mark.parametrize("encoding", ENCODINGS)
def test_it_stores_a_turn_exported_twice_once(live_server, api, acme_key, encoding):
    recorder = Recorder()
    record_agent_turn(recorder)
    sender = exporter(live_server.url, acme_key, encoding)

    assert sender.export(recorder.spans) is SpanExportResult.SUCCESS
    assert sender.export(recorder.spans) is SpanExportResult.SUCCESS
    assert sender.export(recorder.spans[3:]) is SpanExportResult.SUCCESS  # a retried second half

    assert RunTrace.objects.count() == 1
    assert read_back(api, acme_key, expected_document(recorder.spans)["id"]) == expected_document(recorder.spans)
    assert PendingSpan.objects.count() == 0


@pytest.mark.parametrize("encoding", ENCODINGS)
def test_it_takes_a_turn_without_agent_span_under_its_root(live_server, api, acme_key, encoding):
    recorder = Recorder()
    chat = recorder.start(
        "chat gpt-4.1-mini",
        0,
        gen_ai__operation__name="chat",
        gen_ai__request__model="gpt-4.1-mini",
        gen_ai__input__messages=parts(text("user", "Hello?")),
        gen_ai__output__messages=parts(text("assistant", "Hi.")),
    )
    end(chat, 500)

    assert exporter(live_server.url, acme_key, encoding).export(recorder.spans) is SpanExportResult.SUCCESS

    trace_id, span_id = hex_ids(recorder.spans[0])
    document = read_back(api, acme_key, f"{trace_id}-{span_id}")
    assert document["input"] == "Hello?"
    assert document["output"] == "Hi."
    assert "agent" not in document
    assert document["messages"] == [{"role": "user", "content": "Hello?"}, {"role": "assistant", "content": "Hi."}]
    assert document["metadata"]["otlp"]["agentSpanId"] == span_id


def test_it_ignores_a_trace_with_no_generative_span(live_server, acme_key):
    recorder = Recorder()
    end(recorder.start("GET /health", 0, http__request__method="GET"), 5)

    assert exporter(live_server.url, acme_key).export(recorder.spans) is SpanExportResult.SUCCESS

    assert RunTrace.objects.count() == 0
    assert PendingSpan.objects.count() == 0


@pytest.mark.parametrize("encoding", ENCODINGS)
def test_it_refuses_a_wrong_key_and_stores_nothing(live_server, acme_key, encoding):
    recorder = Recorder()
    record_agent_turn(recorder)

    assert exporter(live_server.url, "not-a-key", encoding).export(recorder.spans) is SpanExportResult.FAILURE

    assert RunTrace.objects.count() == 0


@pytest.mark.parametrize("encoding", ENCODINGS)
def test_it_reads_a_gzip_body(live_server, api, acme_key, encoding):
    recorder = Recorder()
    record_agent_turn(recorder)

    result = exporter(live_server.url, acme_key, encoding, gzip=True).export(recorder.spans)

    assert result is SpanExportResult.SUCCESS
    expected = expected_document(recorder.spans)
    assert read_back(api, acme_key, expected["id"]) == expected


def test_another_tenants_key_neither_sees_nor_finishes_the_turn(live_server, api, acme_key, charlie_key):
    recorder = Recorder()
    record_agent_turn(recorder)
    spans = recorder.spans
    exporter(live_server.url, acme_key).export(spans[:3])

    assert exporter(live_server.url, charlie_key).export(spans[3:]) is SpanExportResult.SUCCESS

    turn_id = expected_document(spans)["id"]
    assert PendingSpan.objects.filter(tenant__slug="acme").count() == 3
    assert not RunTrace.objects.filter(tenant__slug="acme").exists()
    assert RunTrace.objects.get(trace_id=turn_id).tenant.slug == "globex"
    assert api(acme_key).get(f"/api/v1/traces/{turn_id}").status_code == 404
    exporter(live_server.url, acme_key).export(spans[3:])
    assert api(charlie_key).get(f"/api/v1/traces/{turn_id}").json()["document"]["tenant"] == "globex"
    assert read_back(api, acme_key, turn_id) == expected_document(spans)


def test_a_console_key_names_the_tenant_in_a_resource_attribute(live_server, api, acme, acme_key):
    console_key = ApiKey.issue(scopes=["ingest"], name="collector")[1]
    recorder = Recorder(**{"kindgi.tenant": "acme"})
    record_agent_turn(recorder)

    assert exporter(live_server.url, console_key).export(recorder.spans) is SpanExportResult.SUCCESS

    expected = expected_document(recorder.spans)
    assert read_back(api, acme_key, expected["id"]) == expected


def test_a_turn_whose_agent_span_never_comes_is_stored_incomplete(live_server, api, acme_key):
    recorder = Recorder()
    record_agent_turn(recorder)
    spans = recorder.spans
    exporter(live_server.url, acme_key).export(spans[:-1])
    PendingSpan.objects.update(received_at="2026-01-01T00:00:00Z")

    assert complete_waiting_otlp_turns.apply().get() == 1  # the task beat runs
    assert complete_waiting() == 0

    turn_id = expected_document(spans)["id"]  # the id names the agent span it waited for
    document = read_back(api, acme_key, turn_id)
    assert document["metadata"]["otlp"]["incomplete"] is True
    assert document["metadata"]["otlp"]["agentSpanId"] is None
    assert [call["id"] for call in document["toolCalls"]] == ["c1", "c2", "c3"]
    assert document["output"] == expected_document(spans)["output"]
    assert "agent" not in document
    assert exporter(live_server.url, acme_key).export(spans[-1:]) is SpanExportResult.SUCCESS
    assert RunTrace.objects.count() == 1
    assert PendingSpan.objects.count() == 0


def test_an_otlp_turn_is_evaluated_at_runtime_like_a_rest_one(live_server, acme_key, halt_guardrail):
    recorder = Recorder()
    agent = recorder.start("invoke_agent support-bot", 0, gen_ai__operation__name="invoke_agent")
    end(
        recorder.start(
            "execute_tool issue_refund",
            10,
            agent,
            gen_ai__operation__name="execute_tool",
            gen_ai__tool__name="issue_refund",
        ),
        20,
    )
    end(agent, 30)

    assert exporter(live_server.url, acme_key).export(recorder.spans) is SpanExportResult.SUCCESS

    violation = Violation.objects.get()
    assert violation.mode == "runtime"
    assert RunTrace.objects.get().withheld is True


@pytest.mark.parametrize("encoding", ENCODINGS)
def test_the_two_environment_variables_are_all_an_exporter_needs(live_server, api, acme_key, monkeypatch, encoding):
    from opentelemetry.exporter.otlp.json.http.trace_exporter import OTLPSpanExporter as JsonExporter
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as ProtobufExporter

    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", f"{live_server.url}/api/v1/otlp")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_HEADERS", f"Authorization=Bearer {acme_key}")
    recorder = Recorder()
    record_agent_turn(recorder)

    sender = ProtobufExporter() if encoding == "protobuf" else JsonExporter()
    assert sender.export(recorder.spans) is SpanExportResult.SUCCESS

    expected = expected_document(recorder.spans)
    assert read_back(api, acme_key, expected["id"]) == expected


def test_beat_runs_the_completion_of_waiting_turns():
    from django.conf import settings

    from kindgi_console.celery import app

    entry = settings.CELERY_BEAT_SCHEDULE["complete-otlp-turns"]
    assert entry["task"] in app.tasks
    schedule = entry["schedule"]
    assert isinstance(schedule, int | float) and schedule <= settings.KINDGI_OTLP_TURN_TIMEOUT_S


def test_two_exports_of_one_trace_at_once_each_see_the_others_spans(acme, acme_key):
    import threading

    from django.db import connection, transaction
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

    from kindgi_console.tenancy.scoping import Caller
    from traces.ingest.otlp import turns

    recorder = Recorder()
    record_agent_turn(recorder)
    spans = recorder.spans
    caller = Caller(key=ApiKey.objects.select_related("tenant").get(tenant=acme))
    first_holds, second_started = threading.Event(), threading.Event()

    def first_export() -> None:
        try:
            with transaction.atomic():
                turns._receive_for(acme, spans_of(encode_spans(spans[:3]))[0], turns.Outcome())
                first_holds.set()
                second_started.wait(5)
                threading.Event().wait(0.5)  # the second export is waiting for this one now
        finally:
            connection.close()

    worker = threading.Thread(target=first_export)
    worker.start()
    first_holds.wait(5)
    second_started.set()
    turns.receive(caller, encode_spans(spans[3:]))
    worker.join()

    stored = RunTrace.objects.get()
    assert stored.document["metadata"]["otlp"]["spanIds"] == expected_document(spans)["metadata"]["otlp"]["spanIds"]
    assert PendingSpan.objects.count() == 0
