"""The messages a span carries, in the RunTrace's Message shape, whichever convention wrote them.

Read in this order, the first that the span has wins (docs/otlp.md, "Messages"):
the GenAI semantic conventions' `gen_ai.input.messages` / `gen_ai.output.messages` (with
`gen_ai.system_instructions` before the input); the older `gen_ai.prompt` / `gen_ai.completion`
attributes, as JSON, as text, or indexed (`gen_ai.prompt.0.role`, as OpenLLMetry writes
them); OpenInference's indexed `llm.input_messages` / `llm.output_messages`; and the
events `gen_ai.content.prompt` / `gen_ai.content.completion`, `gen_ai.<role>.message`
and `gen_ai.choice`.
"""

from __future__ import annotations

from typing import Any

import orjson

from traces.ingest.otlp.spans import Span

Message = dict[str, Any]
ROLES = {
    "system": "system",
    "developer": "system",
    "user": "user",
    "human": "user",
    "assistant": "assistant",
    "ai": "assistant",
    "model": "assistant",
    "tool": "tool",
    "function": "tool",
}


def loads(value: Any) -> Any:
    """A JSON text as its value; anything else (or text that is not JSON) as it is."""
    if isinstance(value, str) and value[:1] in ("[", "{", '"'):
        try:
            return orjson.loads(value)
        except orjson.JSONDecodeError:
            return value
    return value


def text_of(value: Any) -> str | None:
    """A content value as text: text as is, None as None, anything else as JSON."""
    if value is None or isinstance(value, str):
        return value
    return orjson.dumps(value).decode()


def input_messages(span: Span) -> list[Message] | None:
    """The messages sent to the model (or agent) in this span; None when it records none."""
    attributes = span.attributes
    if "gen_ai.input.messages" in attributes:
        system = convert(loads(attributes.get("gen_ai.system_instructions")), "system")
        return system + convert(loads(attributes["gen_ai.input.messages"]), "user")
    return (
        _legacy(attributes, "gen_ai.prompt", "user")
        or _indexed(attributes, "llm.input_messages.", ".message.role", ".message.content")
        or _events(span, "gen_ai.content.prompt", "gen_ai.prompt", "user")
        or _role_events(span)
    )


def output_messages(span: Span) -> list[Message] | None:
    """The messages the model (or agent) answered in this span; None when it records none."""
    attributes = span.attributes
    if "gen_ai.output.messages" in attributes:
        return convert(loads(attributes["gen_ai.output.messages"]), "assistant")
    return (
        _legacy(attributes, "gen_ai.completion", "assistant")
        or _indexed(attributes, "llm.output_messages.", ".message.role", ".message.content")
        or _events(span, "gen_ai.content.completion", "gen_ai.completion", "assistant")
        or _choice_events(span)
    )


def convert(value: Any, default_role: str) -> list[Message]:
    """Messages of the semantic conventions (role and parts), of the older role-and-content
    shape, or one text, as RunTrace messages."""
    if value is None:
        return []
    if isinstance(value, str):
        return [{"role": default_role, "content": value}]
    if isinstance(value, dict):
        value = [value]
    if not isinstance(value, list):
        return [{"role": default_role, "content": text_of(value)}]
    converted: list[Message] = []
    for item in value:
        if isinstance(item, dict):
            converted.extend(_message(item, default_role))
        elif isinstance(item, str):  # gen_ai.system_instructions may be a list of texts
            converted.append({"role": default_role, "content": item})
    return converted


def _message(item: dict[str, Any], default_role: str) -> list[Message]:
    role = ROLES.get(str(item.get("role") or default_role).lower())
    parts = item.get("parts")
    if role is None:
        return []
    if not isinstance(parts, list):
        if item.get("type") == "text":  # a system instruction part on its own
            return [{"role": role, "content": text_of(item.get("content"))}]
        message: Message = {"role": role, "content": text_of(item.get("content"))}
        if isinstance(item.get("tool_call_id"), str):
            message["toolCallId"] = item["tool_call_id"]
        return [message]
    responses = [part for part in parts if isinstance(part, dict) and part.get("type") == "tool_call_response"]
    if responses:
        return [_tool_response(part) for part in responses]
    texts = [
        str(part.get("content"))
        for part in parts
        if isinstance(part, dict) and part.get("type") == "text" and part.get("content") is not None
    ]
    message = {"role": role, "content": "\n".join(texts) if texts else None}
    if isinstance(item.get("name"), str):
        message["name"] = item["name"]
    return [message]


def _tool_response(part: dict[str, Any]) -> Message:
    message: Message = {"role": "tool", "content": text_of(part.get("response", part.get("result")))}
    if isinstance(part.get("id"), str):
        message["toolCallId"] = part["id"]
    return message


def _legacy(attributes: dict[str, Any], key: str, role: str) -> list[Message] | None:
    if key in attributes:
        return convert(loads(attributes[key]), role) or None
    return _indexed(attributes, key + ".", ".role", ".content")


def _indexed(attributes: dict[str, Any], prefix: str, role_suffix: str, content_suffix: str) -> list[Message] | None:
    """`<prefix><n><suffix>` attributes, n = 0, 1, … for as long as they go on."""
    messages: list[Message] = []
    while True:
        index = len(messages)
        role = attributes.get(f"{prefix}{index}{role_suffix}")
        content = attributes.get(f"{prefix}{index}{content_suffix}")
        if role is None and content is None:
            break
        converted = convert([{"role": role or "user", "content": content}], "user")
        messages.append(converted[0] if converted else {"role": "user", "content": text_of(content)})
    return messages or None


def _events(span: Span, name: str, key: str, role: str) -> list[Message] | None:
    for event in span.events:
        if event["name"] == name and key in event["attributes"]:
            return convert(loads(event["attributes"][key]), role) or None
    return None


def _role_events(span: Span) -> list[Message] | None:
    """`gen_ai.system.message`, `gen_ai.user.message`, … events, in their order."""
    messages = []
    for event in span.events:
        name = event["name"]
        if name.startswith("gen_ai.") and name.endswith(".message"):
            role = name.removeprefix("gen_ai.").removesuffix(".message")
            content = event["attributes"].get("content")
            messages.extend(convert([{"role": role, "content": loads(content)}], role))
    return messages or None


def _choice_events(span: Span) -> list[Message] | None:
    messages = []
    for event in span.events:
        if event["name"] == "gen_ai.choice":
            content = event["attributes"].get("message", event["attributes"].get("content"))
            messages.extend(convert(loads(content), "assistant"))
    return messages or None
