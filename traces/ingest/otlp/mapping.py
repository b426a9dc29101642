"""The spans of one agent turn as a RunTrace document (docs/otlp.md, every rule with its example).

A span's operation is `gen_ai.operation.name`, else the first word of its name, else the
OpenInference span kind (`AGENT`, `LLM`, `TOOL`). The turn's head is its `invoke_agent`
span, or its root span when it has none, or nothing when the turn timed out before it came.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from django.conf import settings

from traces.ingest.otlp.messages import Message, input_messages, loads, output_messages
from traces.ingest.otlp.spans import Span

AGENT, TOOL = "invoke_agent", "execute_tool"
MODEL_OPERATIONS = {"chat", "text_completion", "generate_content"}
OPENINFERENCE_KINDS = {"AGENT": AGENT, "LLM": "chat", "TOOL": TOOL}


def operation(span: Span) -> str:
    named = span.attributes.get("gen_ai.operation.name")
    if isinstance(named, str) and named:
        return named
    first = span.name.split(" ", 1)[0]
    if first in MODEL_OPERATIONS or first in (AGENT, TOOL):
        return first
    return OPENINFERENCE_KINDS.get(str(span.attributes.get("openinference.span.kind", "")), "")


def is_agent(span: Span) -> bool:
    return operation(span) == AGENT


def is_generative(span: Span) -> bool:
    """Whether the span is of a model, an agent or a tool: a turn needs at least one."""
    return operation(span) in (*MODEL_OPERATIONS, AGENT, TOOL) or any(
        key.startswith(("gen_ai.", "llm.")) for key in span.attributes
    )


def in_order(spans: list[Span]) -> list[Span]:
    return sorted(spans, key=lambda span: (span.start_ns, span.end_ns, span.span_id))


def document_of(turn_id: str, spans: list[Span], head: Span | None) -> dict[str, Any]:
    """The RunTrace of a turn: its spans, and its head (None: the turn is incomplete)."""
    ordered = in_order(spans)
    models = [span for span in ordered if operation(span) in MODEL_OPERATIONS]
    first = head or ordered[0]
    document: dict[str, Any] = {"id": turn_id}
    _set(document, "agent", _first_text(([head] if head else []) + ordered, "gen_ai.agent.name"))
    _set(document, "flow", _flow(first))
    if head is not None:
        _set_times(document, head.start_ns, head.end_ns)
    else:
        _set_times(document, min(s.start_ns for s in spans), max(s.end_ns for s in spans))
    conversation = _conversation(head, models)
    _set(document, "input", _input(head, models, conversation))
    _set(document, "output", _output(head, models))
    _set(document, "messages", conversation or None)
    _set(document, "toolCalls", [tool_call(span) for span in ordered if operation(span) == TOOL] or None)
    _set(document, "usage", _usage(head, models))
    document["metadata"] = {
        "otlp": {
            "traceId": first.trace_id,
            "agentSpanId": head.span_id if head else None,
            "spanIds": [span.span_id for span in ordered],
            "incomplete": head is None,
            **({"service": first.resource["service.name"]} if "service.name" in first.resource else {}),
        }
    }
    return document


def _set(document: dict[str, Any], key: str, value: Any) -> None:
    if value is not None:
        document[key] = value


def _set_times(target: dict[str, Any], start_ns: int, end_ns: int) -> None:
    """`startedAt` and `endedAt`; an end before the start (a skewed clock) is left out, not refused."""
    _set(target, "startedAt", moment(start_ns))
    if end_ns >= start_ns:
        _set(target, "endedAt", moment(end_ns))


def moment(nanoseconds: int) -> str | None:
    """An OTLP time (nanoseconds since the epoch) in RFC 3339, to the microsecond; 0 is none."""
    if nanoseconds <= 0:
        return None
    seconds, rest = divmod(nanoseconds, 1_000_000_000)
    try:
        stamp = datetime.fromtimestamp(seconds, UTC).replace(microsecond=rest // 1000)
    except (OverflowError, OSError, ValueError):
        return None
    return stamp.isoformat().replace("+00:00", "Z")


def _first_text(spans: list[Span], key: str) -> str | None:
    for span in spans:
        value = span.attributes.get(key)
        if isinstance(value, str) and value:
            return value
    return None


def _flow(head: Span) -> str | None:
    key = settings.KINDGI_OTLP_FLOW_ATTRIBUTE
    value = head.attributes.get(key, head.resource.get(key))
    return value if isinstance(value, str) and value else None


def _conversation(head: Span | None, models: list[Span]) -> list[Message]:
    """The agent span's own messages when it records them; else the model calls' in order,
    each call's input counted once when it repeats the conversation so far."""
    if head is not None:
        recorded = input_messages(head)
        if recorded is not None:
            return recorded + (output_messages(head) or [])
    conversation: list[Message] = []
    for span in models:
        sent = input_messages(span) or []
        if sent[: len(conversation)] == conversation:
            sent = sent[len(conversation) :]
        conversation.extend(sent)
        conversation.extend(output_messages(span) or [])
    return conversation


def _input(head: Span | None, models: list[Span], conversation: list[Message]) -> str | None:
    """The last user message before the first answer; else the head's `input.value`."""
    sent = (input_messages(head) if head else None) or (input_messages(models[0]) if models else None)
    for message in reversed(sent or conversation):
        if message["role"] == "user" and message["content"] is not None:
            return str(message["content"])
    value = head.attributes.get("input.value") if head else None
    return value if isinstance(value, str) else None


def _output(head: Span | None, models: list[Span]) -> str | None:
    """The agent's last answer: the head's output messages, else the last model call's,
    else the head's (or last model call's) `output.value` when it is text."""
    candidates = ([head] if head else []) + list(reversed(models))
    for span in candidates:
        answered = output_messages(span)
        if answered:
            texts = [m["content"] for m in answered if m["role"] == "assistant" and m["content"] is not None]
            if texts:
                return str(texts[-1])
    for span in candidates:
        value = span.attributes.get("output.value")
        if isinstance(value, str) and span.attributes.get("output.mime_type") != "application/json":
            return value
    return None


def tool_call(span: Span) -> dict[str, Any]:
    """One tool call of an `execute_tool` (or OpenInference TOOL) span."""
    attributes = span.attributes
    name = attributes.get("gen_ai.tool.name") or attributes.get("tool.name")
    if not isinstance(name, str) or not name:
        name = span.name.removeprefix(TOOL).strip() or "tool"
    call: dict[str, Any] = {"name": name[:200]}
    call_id = attributes.get("gen_ai.tool.call.id", attributes.get("tool_call.id"))
    if call_id is not None:
        call["id"] = str(call_id)
    for field, keys in (
        ("arguments", ("gen_ai.tool.call.arguments", "tool.parameters", "input.value")),
        ("result", ("gen_ai.tool.call.result", "output.value")),
    ):
        present = next((key for key in keys if key in attributes), None)
        if present is not None:
            call[field] = loads(attributes[present])
    if span.error is not None:  # the status's message, else the error's type
        call["error"] = span.error or str(attributes.get("error.type") or "error")
    _set_times(call, span.start_ns, span.end_ns)
    return call


USAGE_KEYS = {
    "inputTokens": ("gen_ai.usage.input_tokens", "gen_ai.usage.prompt_tokens", "llm.token_count.prompt"),
    "outputTokens": ("gen_ai.usage.output_tokens", "gen_ai.usage.completion_tokens", "llm.token_count.completion"),
}


def _usage(head: Span | None, models: list[Span]) -> dict[str, Any] | None:
    """Tokens summed over the model calls (the head's own when no call records any), and the
    model of the last call."""
    usage: dict[str, Any] = {}
    for spans in (models, [head] if head else []):
        for field, keys in USAGE_KEYS.items():
            counts = [_count(span, keys) for span in spans]
            known = [count for count in counts if count is not None]
            if known:
                usage[field] = sum(known)
        if usage:
            break
    for span in [*reversed(models), *([head] if head else [])]:
        model = (
            _first_text([span], "gen_ai.response.model")
            or _first_text([span], "gen_ai.request.model")
            or _first_text([span], "llm.model_name")
        )
        if model:
            usage["model"] = model
            break
    return usage or None


def _count(span: Span, keys: tuple[str, ...]) -> int | None:
    for key in keys:
        value = span.attributes.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
            return value
    return None
