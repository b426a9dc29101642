"""The OTLP endpoint's answers, read as an exporter reads them: status, Retry-After and the body
in the request's encoding. Bodies are the SDK's own encoders' output for real spans."""

from __future__ import annotations

import gzip
from typing import Any

import orjson
import pytest
from django.db import OperationalError
from django.test import override_settings
from google.protobuf import json_format
from google.rpc.status_pb2 import Status
from opentelemetry.exporter.otlp.json.common.trace_encoder import encode_spans as encode_json
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans as encode_protobuf
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

from kindgi_console.tenancy.models import ApiKey
from tests.traces.otlp_turn import OTLP_PATH, Recorder, end, parts, record_agent_turn, text
from traces.models import PendingSpan, RunTrace
from traces.otlp import turns

PROTOBUF, JSON = "application/x-protobuf", "application/json"


def body_of(spans: Any, content_type: str) -> bytes:
    if content_type == PROTOBUF:
        return encode_protobuf(spans).SerializeToString()
    return encode_json(spans).to_json().encode()


def post(client: Any, body: bytes, content_type: str, **headers: str) -> Any:
    return client.post(OTLP_PATH, data=body, content_type=content_type, **headers)


def answer(response: Any, message: Any) -> Any:
    """The response's body parsed as `message`, in the encoding it says it has."""
    if response["Content-Type"] == PROTOBUF:
        message.ParseFromString(response.content)
    else:
        json_format.Parse(response.content, message)
    return message


def agent_turn_spans() -> Any:
    recorder = Recorder()
    record_agent_turn(recorder)
    return recorder.spans


@pytest.mark.parametrize("content_type", [PROTOBUF, JSON])
def test_it_answers_an_export_response_in_the_request_encoding(db, api, acme_key, content_type):
    response = post(api(acme_key), body_of(agent_turn_spans(), content_type), content_type)

    assert response.status_code == 200
    assert response["Content-Type"] == content_type
    assert not answer(response, ExportTraceServiceResponse()).HasField("partial_success")
    assert RunTrace.objects.count() == 1


@pytest.mark.parametrize("content_type", [PROTOBUF, JSON])
def test_a_huge_attribute_refuses_its_turn_with_a_partial_success(db, api, acme_key, content_type):
    recorder = Recorder()
    chat = recorder.start("chat m", 0, gen_ai__operation__name="chat",
                          gen_ai__input__messages=parts(text("user", "x" * 2_000_000)))
    end(chat, 10)

    response = post(api(acme_key), body_of(recorder.spans, content_type), content_type)

    assert response.status_code == 200
    partial = answer(response, ExportTraceServiceResponse()).partial_success
    assert partial.rejected_spans == 1
    assert "over the limit of 1048576" in partial.error_message
    assert RunTrace.objects.count() == 0


@pytest.mark.parametrize("content_type", [PROTOBUF, JSON])
def test_a_wrong_key_is_401_with_a_status_body(db, api, content_type):
    response = post(api("wrong"), body_of(agent_turn_spans(), content_type), content_type)

    assert response.status_code == 401
    assert answer(response, Status()).message == "unknown or revoked API key"
    assert response["WWW-Authenticate"].startswith("Bearer")


def test_no_key_is_401_and_a_key_without_ingest_is_403(db, api, acme):
    read_key = ApiKey.issue(scopes=["read"], tenant=acme, name="reader")[1]
    body = body_of(agent_turn_spans(), PROTOBUF)

    assert post(api(), body, PROTOBUF).status_code == 401
    forbidden = post(api(read_key), body, PROTOBUF)
    assert forbidden.status_code == 403
    assert "ingest" in answer(forbidden, Status()).message
    assert RunTrace.objects.count() == 0


@pytest.mark.parametrize("content_type", [PROTOBUF, JSON])
def test_a_gzip_body_is_read(db, api, acme_key, content_type):
    body = gzip.compress(body_of(agent_turn_spans(), content_type))

    response = post(api(acme_key), body, content_type, HTTP_CONTENT_ENCODING="gzip")

    assert response.status_code == 200
    assert RunTrace.objects.count() == 1


@override_settings(KINDGI_MAX_REQUEST_BYTES=64 * 1024)
def test_a_gzip_body_that_inflates_past_the_limit_is_413(db, api, acme_key):
    bomb = gzip.compress(b"\x00" * (10 * 1024 * 1024))
    assert len(bomb) < 64 * 1024

    response = post(api(acme_key), bomb, PROTOBUF, HTTP_CONTENT_ENCODING="gzip")

    assert response.status_code == 413
    assert "inflates" in answer(response, Status()).message


@override_settings(KINDGI_MAX_REQUEST_BYTES=1024)
def test_a_body_over_the_limit_is_413_and_stores_nothing(db, api, acme_key):
    response = post(api(acme_key), body_of(agent_turn_spans(), JSON), JSON)

    assert response.status_code == 413
    assert orjson.loads(response.content)["code"] == 8  # RESOURCE_EXHAUSTED
    assert RunTrace.objects.count() == 0


@pytest.mark.parametrize(("body", "content_type", "headers", "status", "words"), [
    (b"\xff\xff\xff", PROTOBUF, {}, 400, "not an ExportTraceServiceRequest"),
    (b"{not json", JSON, {}, 400, "not valid JSON"),
    (b'{"resourceSpans": [{"scopeSpans": [{"spans": [{"traceId": "zz"}]}]}]}', JSON, {}, 400, "not hex"),
    (b'{"resourceSpans": 3}', JSON, {}, 400, "not an ExportTraceServiceRequest"),
    (b"plain", "text/plain", {}, 415, "text/plain"),
    (b"not gzip", PROTOBUF, {"HTTP_CONTENT_ENCODING": "gzip"}, 400, "not valid gzip"),
    (b"", PROTOBUF, {"HTTP_CONTENT_ENCODING": "br"}, 415, "'br'"),
])
def test_an_unreadable_body_is_refused_naming_why(db, api, acme_key, body, content_type, headers, status, words):
    response = post(api(acme_key), body, content_type, **headers)

    assert response.status_code == status
    assert words in answer(response, Status()).message


@override_settings(KINDGI_API_RATE="1/minute")
def test_a_throttled_exporter_is_told_when_to_retry(db, api, acme_key):
    body = body_of(agent_turn_spans(), PROTOBUF)
    assert post(api(acme_key), body, PROTOBUF).status_code == 200

    response = post(api(acme_key), body, PROTOBUF)

    assert response.status_code == 429
    assert int(response["Retry-After"]) >= 1


def test_an_unavailable_database_is_503_with_retry_after(db, api, acme_key, monkeypatch):
    def unavailable(*args: Any) -> None:
        raise OperationalError("the database system is starting up")

    monkeypatch.setattr(turns, "receive", unavailable)  # the fault, injected where the view meets it

    response = post(api(acme_key), body_of(agent_turn_spans(), JSON), JSON)

    assert response.status_code == 503
    assert response["Retry-After"] == "5"


@override_settings(KINDGI_OTLP_MAX_PENDING_SPANS=2)
def test_a_tenant_keeps_at_most_its_share_of_waiting_spans(db, api, acme_key):
    spans = agent_turn_spans()[:3]  # a chat and two tools: their agent span has not ended

    response = post(api(acme_key), body_of(spans, PROTOBUF), PROTOBUF)

    partial = answer(response, ExportTraceServiceResponse()).partial_success
    assert partial.rejected_spans == 1
    assert "unfinished turns" in partial.error_message
    assert PendingSpan.objects.count() == 2


def test_a_console_key_without_the_tenant_attribute_is_refused_per_span(db, api, acme):
    console_key = ApiKey.issue(scopes=["ingest"], name="collector")[1]

    response = post(api(console_key), body_of(agent_turn_spans(), PROTOBUF), PROTOBUF)

    partial = answer(response, ExportTraceServiceResponse()).partial_success
    assert partial.rejected_spans == 6
    assert "kindgi.tenant" in partial.error_message
    assert RunTrace.objects.count() == 0


def test_another_tenant_named_by_a_tenant_key_is_not_written(db, api, acme_key, globex):
    recorder = Recorder(**{"kindgi.tenant": "globex"})
    record_agent_turn(recorder)

    assert post(api(acme_key), body_of(recorder.spans, PROTOBUF), PROTOBUF).status_code == 200

    assert list(RunTrace.objects.values_list("tenant__slug", flat=True)) == ["acme"]


def test_the_trace_page_shows_it_came_over_otlp_with_its_span_ids(db, api, acme_key, alice, client, charlie):
    spans = agent_turn_spans()
    post(api(acme_key), body_of(spans, PROTOBUF), PROTOBUF)
    trace = RunTrace.objects.get()
    client.force_login(alice)

    body = client.get(f"/traces/{trace.pk}/").content.decode()

    assert "Received over</dt><dd>OTLP" in body
    for span in spans:
        assert f"{span.get_span_context().span_id:016x}" in body
    client.force_login(charlie)
    assert client.get(f"/traces/{trace.pk}/").status_code == 404


def test_a_waiting_span_too_large_or_with_nul_is_refused_and_not_kept(db, api, acme_key):
    recorder = Recorder()
    agent = recorder.start("invoke_agent bot", 0, gen_ai__operation__name="invoke_agent")
    end(recorder.start("chat m", 1, agent, gen_ai__prompt="x" * 1_100_000), 2)
    end(recorder.start("chat m", 3, agent, gen_ai__prompt="a\x00b"), 4)
    end(recorder.start("chat m", 5, agent, gen_ai__prompt="fine"), 6)

    response = post(api(acme_key), body_of(recorder.spans, PROTOBUF), PROTOBUF)

    partial = answer(response, ExportTraceServiceResponse()).partial_success
    assert partial.rejected_spans == 2
    assert "over the limit" in partial.error_message and "NUL" in partial.error_message
    assert PendingSpan.objects.count() == 1


def test_an_agent_name_longer_than_its_column_refuses_the_turn_by_name(db, api, acme_key):
    recorder = Recorder()
    end(recorder.start("invoke_agent bot", 0, gen_ai__operation__name="invoke_agent",
                       gen_ai__agent__name="a" * 201), 1)

    response = post(api(acme_key), body_of(recorder.spans, PROTOBUF), PROTOBUF)

    partial = answer(response, ExportTraceServiceResponse()).partial_success
    assert partial.rejected_spans == 1
    assert "/agent: agent is longer than 200" in partial.error_message
    assert RunTrace.objects.count() == 0
