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
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.exporter.otlp.json.common.trace_encoder import encode_spans as encode_json
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans as encode_protobuf
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

from kindgi_console.tenancy.models import ApiKey
from tests.traces.otlp_turn import OTLP_PATH, Recorder, end, parts, record_agent_turn, text
from traces.ingest.otlp import turns
from traces.models import PendingSpan, RunTrace

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
    chat = recorder.start(
        "chat m", 0, gen_ai__operation__name="chat", gen_ai__input__messages=parts(text("user", "x" * 2_000_000))
    )
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


@pytest.mark.parametrize(
    ("body", "content_type", "headers", "status", "words"),
    [
        (b"\xff\xff\xff", PROTOBUF, {}, 400, "not an ExportTraceServiceRequest"),
        (b"{not json", JSON, {}, 400, "not valid JSON"),
        (b'{"resourceSpans": [], "resourceSpans": [{}]}', JSON, {}, 400, "appears twice"),
        (b"[" * 100_000 + b"]" * 100_000, JSON, {}, 400, "depth"),
        (b'{"resourceSpans": [{"scopeSpans": [{"spans": [{"traceId": "zz"}]}]}]}', JSON, {}, 400, "not hex"),
        (b'{"resourceSpans": 3}', JSON, {}, 400, "not an ExportTraceServiceRequest"),
        (b"plain", "text/plain", {}, 415, "text/plain"),
        (b"not gzip", PROTOBUF, {"HTTP_CONTENT_ENCODING": "gzip"}, 400, "not valid gzip"),
        (b"", PROTOBUF, {"HTTP_CONTENT_ENCODING": "br"}, 415, "'br'"),
    ],
)
def test_an_unreadable_body_is_refused_naming_why(db, api, acme_key, body, content_type, headers, status, words):
    response = post(api(acme_key), body, content_type, **headers)

    assert response.status_code == status
    assert words in answer(response, Status()).message


@override_settings(KINDGI_RUNTIME_RATE="1/minute")
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
    end(recorder.start("invoke_agent bot", 0, gen_ai__operation__name="invoke_agent", gen_ai__agent__name="a" * 201), 1)

    response = post(api(acme_key), body_of(recorder.spans, PROTOBUF), PROTOBUF)

    partial = answer(response, ExportTraceServiceResponse()).partial_success
    assert partial.rejected_spans == 1
    assert "/agent: agent is longer than 200" in partial.error_message
    assert RunTrace.objects.count() == 0


JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**64 - 1)
    | st.text(max_size=40)
    | st.sampled_from(["00" * 16, "ab" * 8, ""]),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(
            st.sampled_from(
                [
                    "resourceSpans",
                    "scopeSpans",
                    "spans",
                    "traceId",
                    "spanId",
                    "parentSpanId",
                    "name",
                    "attributes",
                    "key",
                    "value",
                    "stringValue",
                    "intValue",
                    "kvlistValue",
                    "values",
                    "startTimeUnixNano",
                    "events",
                    "status",
                    "code",
                    "flags",
                    "resource",
                ]
            )
            | st.text(max_size=8),
            inner,
            max_size=5,
        )
    ),
    max_leaves=30,
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(document=st.dictionaries(st.sampled_from(["resourceSpans", "other"]), JSON_VALUES, max_size=2))
def test_any_json_body_is_answered_200_or_400_never_a_server_error(db, api, acme_key, document):
    response = post(api(acme_key), orjson.dumps(document), JSON)

    assert response.status_code in (200, 400), response.content


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(body=st.binary(max_size=300))
def test_any_protobuf_body_is_answered_200_or_400_never_a_server_error(db, api, acme_key, body):
    response = post(api(acme_key), body, PROTOBUF)

    assert response.status_code in (200, 400), response.content


def test_a_double_json_cannot_hold_is_kept_as_text(db, api, acme_key):
    recorder = Recorder()
    agent = recorder.start("invoke_agent bot", 0, gen_ai__operation__name="invoke_agent")
    end(
        recorder.start(
            "execute_tool measure",
            1,
            agent,
            gen_ai__tool__call__arguments=float("nan"),
            gen_ai__tool__call__result=float("-inf"),
        ),
        2,
    )
    end(agent, 3)

    response = post(api(acme_key), body_of(recorder.spans, PROTOBUF), PROTOBUF)

    assert response.status_code == 200
    call = RunTrace.objects.get().document["toolCalls"][0]
    assert (call["arguments"], call["result"]) == ("nan", "-inf")


ATTRIBUTE_KEYS = [
    "gen_ai.operation.name",
    "gen_ai.agent.name",
    "gen_ai.input.messages",
    "gen_ai.output.messages",
    "gen_ai.system_instructions",
    "gen_ai.prompt",
    "gen_ai.completion",
    "gen_ai.prompt.0.role",
    "gen_ai.prompt.0.content",
    "gen_ai.tool.name",
    "gen_ai.tool.call.id",
    "gen_ai.tool.call.arguments",
    "gen_ai.tool.call.result",
    "gen_ai.usage.input_tokens",
    "gen_ai.response.model",
    "kindgi.flow",
    "llm.input_messages.0.message.role",
    "llm.input_messages.0.message.content",
    "output.value",
    "openinference.span.kind",
    "error.type",
]
JSON_TEXT = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(
            st.sampled_from(["role", "parts", "type", "content", "id", "response", "name"]), inner, max_size=4
        )
    ),
    max_leaves=12,
).map(lambda value: orjson.dumps(value).decode())
ATTRIBUTE_VALUES = (
    st.text(max_size=30)
    | JSON_TEXT
    | st.integers(-(2**63), 2**63 - 1)
    | st.floats()
    | st.booleans()
    | st.lists(st.text(max_size=5), max_size=3)
    | st.sampled_from(["invoke_agent", "chat", "execute_tool", "AGENT", "LLM", "TOOL", "user"])
)
SPAN = st.fixed_dictionaries(
    {
        "span": st.sampled_from(["a", "b", "c", "d"]),
        "parent": st.sampled_from(["", "a", "b", "c", "e"]),
        "name": st.sampled_from(["invoke_agent bot", "chat m", "execute_tool t", "GET /", "x\x00"]),
        "start": st.integers(0, 2**64 - 1),
        "end": st.integers(0, 2**64 - 1),
        "error": st.none() | st.text(max_size=10),
        "attributes": st.dictionaries(st.sampled_from(ATTRIBUTE_KEYS), ATTRIBUTE_VALUES, max_size=6),
    }
)


def request_of(spans: list[dict[str, Any]]) -> bytes:
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
    from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue

    def any_value(value: Any) -> AnyValue:
        if isinstance(value, bool):
            return AnyValue(bool_value=value)
        if isinstance(value, int):
            return AnyValue(int_value=value)
        if isinstance(value, float):
            return AnyValue(double_value=value)
        if isinstance(value, list):
            result = AnyValue()
            result.array_value.values.extend(any_value(item) for item in value)
            return result
        return AnyValue(string_value=value)

    request = ExportTraceServiceRequest()
    scope = request.resource_spans.add().scope_spans.add()
    for data in spans:
        span = scope.spans.add(
            trace_id=b"\x01" * 16,
            span_id=data["span"].encode() * 8,
            name=data["name"],
            start_time_unix_nano=data["start"],
            end_time_unix_nano=data["end"],
        )
        if data["parent"]:
            span.parent_span_id = data["parent"].encode() * 8
        if data["error"] is not None:
            span.status.code = 2
            span.status.message = data["error"]
        span.attributes.extend(KeyValue(key=key, value=any_value(value)) for key, value in data["attributes"].items())
    return request.SerializeToString()


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(spans=st.lists(SPAN, min_size=1, max_size=5))
def test_any_well_formed_spans_are_stored_or_refused_never_a_server_error(db, api, acme_key, spans):
    response = post(api(acme_key), request_of(spans), PROTOBUF)

    assert response.status_code == 200, response.content
    PendingSpan.objects.all().delete()
    RunTrace.objects.all().delete()


@pytest.mark.parametrize("method", ["get", "put", "delete", "trace"])
def test_another_method_is_405_not_500(db, api, acme_key, method):
    client = api(acme_key)
    client.raise_request_exception = False
    response = client.generic(method.upper(), "/api/v1/otlp/v1/traces")
    assert response.status_code == 405
