"""Agent turns recorded with the real OpenTelemetry SDK, and the RunTrace each must become.

The spans are recorded as an agent runtime instrumented with the GenAI semantic conventions
records them (an `invoke_agent` span over `chat` and `execute_tool` spans), kept in the
SDK's in-memory exporter, and exported by the tests with the SDK's OTLP/HTTP exporters.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from opentelemetry import trace as otel_trace
from opentelemetry.exporter.otlp.json.http.trace_exporter import OTLPSpanExporter as JsonExporter
from opentelemetry.exporter.otlp.proto.http import Compression
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as ProtobufExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Status, StatusCode

T0 = int(datetime(2026, 11, 29, 10, tzinfo=UTC).timestamp()) * 1_000_000_000
MS = 1_000_000
OTLP_PATH = "/api/v1/otlp/v1/traces"


def exporter(base_url: str, key: str, encoding: str = "protobuf", gzip: bool = False) -> SpanExporter:
    """The SDK's OTLP/HTTP exporter (protobuf or JSON) aimed at a console, with a key."""
    endpoint = base_url.rstrip("/") + OTLP_PATH
    headers = {"Authorization": f"Bearer {key}"}
    if encoding == "protobuf":
        return ProtobufExporter(
            endpoint=endpoint,
            headers=headers,
            timeout=10,
            compression=Compression.Gzip if gzip else Compression.NoCompression,
        )
    from opentelemetry.exporter.otlp.common.http import Compression as JsonCompression

    return JsonExporter(
        endpoint=endpoint,
        headers=headers,
        timeout=10,
        compression=JsonCompression.GZIP if gzip else JsonCompression.NONE,
    )


class Recorder:
    """A tracer provider that keeps its finished spans in memory, in the order they ended."""

    def __init__(self, **resource: Any) -> None:
        self.memory = InMemorySpanExporter()
        self.provider = TracerProvider(resource=Resource.create({"service.name": "support-bot", **resource}))
        self.provider.add_span_processor(SimpleSpanProcessor(self.memory))
        self.tracer = self.provider.get_tracer("kindgi-tests")

    def start(self, name: str, at_ms: int, parent: otel_trace.Span | None = None, **attributes: Any) -> otel_trace.Span:
        context = otel_trace.set_span_in_context(parent) if parent is not None else None
        attributes = {key.replace("__", "."): value for key, value in attributes.items()}
        return self.tracer.start_span(name, context=context, start_time=T0 + at_ms * MS, attributes=attributes)

    @property
    def spans(self) -> tuple[ReadableSpan, ...]:
        return self.memory.get_finished_spans()


def end(span: otel_trace.Span, at_ms: int, error: str | None = None) -> None:
    if error is not None:
        span.set_status(Status(StatusCode.ERROR, error))
        span.set_attribute("error.type", "TimeoutError")
    span.end(end_time=T0 + at_ms * MS)


def parts(*items: dict[str, Any]) -> str:
    return json.dumps(list(items))


def text(role: str, content: str) -> dict[str, Any]:
    return {"role": role, "parts": [{"type": "text", "content": content}]}


def tool_response(call_id: str, response: Any) -> dict[str, Any]:
    return {"role": "tool", "parts": [{"type": "tool_call_response", "id": call_id, "response": response}]}


QUESTION = "Can I get a refund for order 1234?"
ANSWER = "Yes: orders can be refunded within 30 days [policy-refunds]."
SYSTEM = json.dumps([{"type": "text", "content": "You help customers with refunds."}])
CALLS = {
    "role": "assistant",
    "finish_reason": "tool_call",
    "parts": [
        {"type": "tool_call", "id": "c1", "name": "lookup_order", "arguments": {"order": "1234"}},
        {"type": "tool_call", "id": "c2", "name": "search_policies", "arguments": {"q": "refund"}},
    ],
}
TIMEOUT = "timeout: the policy index did not answer"


def record_agent_turn(recorder: Recorder) -> None:
    """An agent turn: two model calls, three tool calls, of which one failed."""
    agent = recorder.start(
        "invoke_agent support-bot",
        0,
        gen_ai__operation__name="invoke_agent",
        gen_ai__agent__name="support-bot",
        kindgi__flow="refund",
    )
    chat = recorder.start(
        "chat gpt-4.1-mini",
        100,
        agent,
        gen_ai__operation__name="chat",
        gen_ai__request__model="gpt-4.1-mini",
        gen_ai__response__model="gpt-4.1-mini-2025",
        gen_ai__system_instructions=SYSTEM,
        gen_ai__input__messages=parts(text("user", QUESTION)),
        gen_ai__output__messages=parts(CALLS),
        gen_ai__usage__input_tokens=500,
        gen_ai__usage__output_tokens=30,
    )
    end(chat, 900)
    for call_id, start, arguments, result, error in (
        ("c1", 1000, {"order": "1234"}, {"status": "delivered"}, None),
        ("c2", 1200, {"q": "refund"}, None, TIMEOUT),
        ("c3", 1500, {"q": "refund"}, ["policy-refunds"], None),
    ):
        name = "lookup_order" if call_id == "c1" else "search_policies"
        tool = recorder.start(
            f"execute_tool {name}",
            start,
            agent,
            gen_ai__operation__name="execute_tool",
            gen_ai__tool__name=name,
            gen_ai__tool__call__id=call_id,
            gen_ai__tool__call__arguments=json.dumps(arguments),
        )
        if result is not None:
            tool.set_attribute("gen_ai.tool.call.result", json.dumps(result))
        end(tool, start + 150, error)
    history = [
        text("user", QUESTION),
        CALLS,
        tool_response("c1", {"status": "delivered"}),
        tool_response("c2", TIMEOUT),
        tool_response("c3", ["policy-refunds"]),
    ]
    chat = recorder.start(
        "chat gpt-4.1-mini",
        2000,
        agent,
        gen_ai__operation__name="chat",
        gen_ai__request__model="gpt-4.1-mini",
        gen_ai__response__model="gpt-4.1-mini-2025",
        gen_ai__system_instructions=SYSTEM,
        gen_ai__input__messages=parts(*history),
        gen_ai__output__messages=parts(text("assistant", ANSWER)),
        gen_ai__usage__input_tokens=812,
        gen_ai__usage__output_tokens=40,
    )
    end(chat, 3800)
    end(agent, 4000)


def hex_ids(span: ReadableSpan) -> tuple[str, str]:
    context = span.get_span_context()
    assert context is not None
    return f"{context.trace_id:032x}", f"{context.span_id:016x}"


def expected_document(spans: Sequence[ReadableSpan], tenant: str = "acme") -> dict[str, Any]:
    """The RunTrace that `record_agent_turn`'s spans must become (docs/otlp.md's example)."""
    by_start = sorted(spans, key=lambda span: span.start_time or 0)
    trace_id, agent_id = hex_ids(spans[-1])
    return {
        "id": f"{trace_id}-{agent_id}",
        "tenant": tenant,
        "agent": "support-bot",
        "flow": "refund",
        "startedAt": "2026-11-29T10:00:00Z",
        "endedAt": "2026-11-29T10:00:04Z",
        "input": QUESTION,
        "output": ANSWER,
        "messages": [
            {"role": "system", "content": "You help customers with refunds."},
            {"role": "user", "content": QUESTION},
            {"role": "assistant", "content": None},
            {"role": "tool", "content": '{"status":"delivered"}', "toolCallId": "c1"},
            {"role": "tool", "content": TIMEOUT, "toolCallId": "c2"},
            {"role": "tool", "content": '["policy-refunds"]', "toolCallId": "c3"},
            {"role": "assistant", "content": ANSWER},
        ],
        "toolCalls": [
            {
                "name": "lookup_order",
                "id": "c1",
                "arguments": {"order": "1234"},
                "result": {"status": "delivered"},
                "startedAt": "2026-11-29T10:00:01Z",
                "endedAt": "2026-11-29T10:00:01.150000Z",
            },
            {
                "name": "search_policies",
                "id": "c2",
                "arguments": {"q": "refund"},
                "error": TIMEOUT,
                "startedAt": "2026-11-29T10:00:01.200000Z",
                "endedAt": "2026-11-29T10:00:01.350000Z",
            },
            {
                "name": "search_policies",
                "id": "c3",
                "arguments": {"q": "refund"},
                "result": ["policy-refunds"],
                "startedAt": "2026-11-29T10:00:01.500000Z",
                "endedAt": "2026-11-29T10:00:01.650000Z",
            },
        ],
        "usage": {"inputTokens": 1312, "outputTokens": 70, "model": "gpt-4.1-mini-2025"},
        "metadata": {
            "otlp": {
                "traceId": trace_id,
                "agentSpanId": agent_id,
                "spanIds": [hex_ids(span)[1] for span in by_start],
                "incomplete": False,
                "service": "support-bot",
            }
        },
    }
