"""What the fake judge provider speaks: the steps a test scripts, the requests it records,
and the replies and refusals a real OpenAI or Anthropic endpoint would send (`tests.fakeproviders`
serves them over a socket).
"""

from __future__ import annotations

import hashlib
import json
import math
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tests.fakeproviders import FakeProvider

OPENAI_PATH = "/v1/chat/completions"
ANTHROPIC_PATH = "/v1/messages"


@dataclass(frozen=True)
class Answer:
    """A 200 reply carrying `text`, in the protocol of the endpoint that was called.

    Tokens default to about four characters a token of the request and the text.
    `cut_off` ends it with finish_reason "length" / stop_reason "max_tokens". `thinking`
    adds a thinking block (Anthropic) or reasoning tokens (OpenAI). `usage=False` leaves
    usage out, as some compatible servers do. `delay_s` answers late. `tool_calls` makes it
    an agent model's request to call tools (Chat Completions `tool_calls`).
    """

    text: str | None
    input_tokens: int | None = None
    output_tokens: int | None = None
    cut_off: bool = False
    thinking: str | None = None
    usage: bool = True
    delay_s: float = 0.0
    #: (name, arguments) of the tool calls the model asks for (OpenAI only): finish_reason "tool_calls".
    tool_calls: tuple[tuple[str, dict[str, Any]], ...] = ()


@dataclass(frozen=True)
class Fault:
    """An error reply with the provider's error body, and Retry-After when given."""

    status: int
    message: str = "the fake provider is having a bad moment"
    retry_after: str | None = None
    delay_s: float = 0.0


@dataclass(frozen=True)
class Raw:
    """A reply with exactly this status and body (not even JSON, if you like)."""

    status: int
    body: bytes
    content_type: str = "application/json"


@dataclass(frozen=True)
class Hangup:
    """Close the connection without a reply."""


@dataclass(frozen=True)
class Drip:
    """`answer` sent `chunk` bytes every `interval_s`: the headers at once and then the body, or
    (`headers_too`) the whole response from its status line, as a stalling provider does."""

    answer: Answer
    chunk: int = 4
    interval_s: float = 0.5
    headers_too: bool = False


Step = Answer | Fault | Raw | Hangup | Drip


@dataclass(frozen=True)
class RecordedRequest:
    """A request as the server received it; header names lowercased."""

    path: str
    headers: dict[str, str]
    body: Any

    @property
    def protocol(self) -> str:
        return "anthropic" if self.path == ANTHROPIC_PATH else "openai"


def error_type(status: int) -> str:
    return {
        400: "invalid_request_error",
        401: "authentication_error",
        404: "not_found_error",
        429: "rate_limit_error",
        529: "overloaded_error",
    }.get(status, "api_error")


def refusal(provider: FakeProvider, request: RecordedRequest) -> tuple[int, str, str] | None:
    """The (status, type, message) a real provider would refuse this request with, if any."""
    if provider.api_key is not None and not _authorized(provider.api_key, request):
        return 401, "authentication_error", "invalid x-api-key / Authorization"
    body = request.body
    if not isinstance(body, dict):
        return 400, "invalid_request_error", "the request body is not a JSON object"
    if not isinstance(body.get("model"), str):
        return 400, "invalid_request_error", "model: Field required"
    if not isinstance(body.get("messages"), list) or not body["messages"]:
        return 400, "invalid_request_error", "messages: Field required"
    if request.protocol == "anthropic":
        return _anthropic_refusal(request)
    return _openai_refusal(provider, body)


def _authorized(api_key: str, request: RecordedRequest) -> bool:
    if request.protocol == "anthropic":
        return request.headers.get("x-api-key") == api_key
    return request.headers.get("authorization") == f"Bearer {api_key}"


def _anthropic_refusal(request: RecordedRequest) -> tuple[int, str, str] | None:
    body = request.body
    bad = "invalid_request_error"
    if "anthropic-version" not in request.headers:
        return 400, bad, "anthropic-version: header is required"
    if not isinstance(body.get("max_tokens"), int):
        return 400, bad, "max_tokens: Field required"
    thinking = body.get("thinking")
    if thinking is None:
        return None
    budget = thinking.get("budget_tokens") if isinstance(thinking, dict) else None
    if not isinstance(budget, int) or budget < 1024:
        return (400, bad, "thinking.enabled.budget_tokens: Input should be greater than or equal to 1024")
    if budget >= body["max_tokens"]:
        return 400, bad, "`max_tokens` must be greater than `thinking.budget_tokens`"
    if "temperature" in body and body["temperature"] != 1:
        return 400, bad, "`temperature` may only be set to 1 when thinking is enabled"
    return None


def _openai_refusal(provider: FakeProvider, body: dict[str, Any]) -> tuple[int, str, str] | None:
    bad = "invalid_request_error"
    if "max_tokens" in body and "max_completion_tokens" in body:
        return 400, bad, "Use either max_tokens or max_completion_tokens, not both."
    if body["model"] in provider.no_temperature_models and "temperature" in body:
        return (
            400,
            bad,
            "Unsupported value: 'temperature' does not support 0 with this model. "
            "Only the default (1) value is supported.",
        )
    return None


def reply(request: RecordedRequest, answer: Answer) -> dict[str, Any]:
    input_tokens = answer.input_tokens if answer.input_tokens is not None else _tokens(request.body)
    thinking_tokens = _count(answer.thinking or "")
    output_tokens = answer.output_tokens
    if output_tokens is None:
        output_tokens = _count(answer.text or "") + thinking_tokens
    if request.protocol == "anthropic":
        return _anthropic_reply(request.body, answer, input_tokens, output_tokens)
    return _openai_reply(request.body, answer, input_tokens, output_tokens, thinking_tokens)


def _openai_reply(
    body: dict[str, Any], answer: Answer, input_tokens: int, output_tokens: int, thinking_tokens: int
) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": answer.text, "refusal": None}
    finish_reason = "length" if answer.cut_off else "stop"
    if answer.tool_calls:
        message["tool_calls"] = [
            {"id": f"call_{n}", "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}
            for n, (name, arguments) in enumerate(answer.tool_calls, 1)
        ]
        finish_reason = "tool_calls"
    reply: dict[str, Any] = {
        "id": "chatcmpl-" + digest(body)[:24],
        "object": "chat.completion",
        "created": int(time.time()),
        "model": body["model"],
        "choices": [{"index": 0, "message": message, "logprobs": None, "finish_reason": finish_reason}],
    }
    if answer.usage:
        reply["usage"] = {
            "prompt_tokens": input_tokens,
            "completion_tokens": output_tokens,
            "total_tokens": input_tokens + output_tokens,
            "completion_tokens_details": {"reasoning_tokens": thinking_tokens},
        }
    return reply


def stream_events(reply: dict[str, Any], answer: Answer) -> list[dict[str, Any]]:
    """A Chat Completions reply as the `stream: true` events that carry it (`chat.completion.chunk`):
    the role, the text a few characters a delta, each tool call (its name, then its arguments in
    two pieces), the finish reason, and the usage in a last event of its own (as OpenAI sends it
    when `stream_options.include_usage` asks for it)."""
    head = {key: reply[key] for key in ("id", "created", "model")} | {"object": "chat.completion.chunk"}
    choice = reply["choices"][0]
    message = choice["message"]

    def event(delta: dict[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
        return head | {"choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}]}

    events = [event({"role": "assistant", "content": ""})]
    text = answer.text or ""
    events += [event({"content": text[start : start + 8]}) for start in range(0, len(text), 8)]
    for index, call in enumerate(message.get("tool_calls", [])):
        arguments = call["function"]["arguments"]
        half = len(arguments) // 2
        events.append(
            event(
                {
                    "tool_calls": [
                        {
                            "index": index,
                            "id": call["id"],
                            "type": "function",
                            "function": {"name": call["function"]["name"], "arguments": arguments[:half]},
                        }
                    ]
                }
            )
        )
        events.append(event({"tool_calls": [{"index": index, "function": {"arguments": arguments[half:]}}]}))
    events.append(event({}, choice["finish_reason"]))
    if "usage" in reply:
        events.append(head | {"choices": [], "usage": reply["usage"]})
    return events


def _anthropic_reply(body: dict[str, Any], answer: Answer, input_tokens: int, output_tokens: int) -> dict[str, Any]:
    content: list[dict[str, Any]] = []
    if answer.thinking is not None:
        content.append({"type": "thinking", "thinking": answer.thinking, "signature": "c2ln"})
    if answer.text is not None:
        content.append({"type": "text", "text": answer.text})
    reply: dict[str, Any] = {
        "id": "msg_" + digest(body)[:24],
        "type": "message",
        "role": "assistant",
        "model": body["model"],
        "content": content,
        "stop_reason": "max_tokens" if answer.cut_off else "end_turn",
        "stop_sequence": None,
    }
    if answer.usage:
        reply["usage"] = {
            "input_tokens": input_tokens,
            "output_tokens": output_tokens,
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 0,
        }
    return reply


def own_judgement(request: RecordedRequest) -> Answer:
    """The unscripted answer: deterministic per trace, FAIL about one time in five."""
    body = request.body
    system = body.get("system") or _message_text(body, "system")
    user = _message_text(body, "user")
    byte = hashlib.sha256(user.encode()).digest()[0]
    thinking = "Weighing the turn against the criteria." if _thinks(body) else None
    if '"score"' in system:
        return Answer(
            json.dumps({"score": round(byte / 255, 2), "reason": "scored by the fake judge"}), thinking=thinking
        )
    verdict = "FAIL" if byte < 52 else "PASS"
    reason = "the turn does not meet the criteria" if verdict == "FAIL" else "the turn meets the criteria"
    return Answer(json.dumps({"verdict": verdict, "reason": reason}), thinking=thinking)


def _thinks(body: dict[str, Any]) -> bool:
    return "thinking" in body or "reasoning_effort" in body


def _message_text(body: dict[str, Any], role: str) -> str:
    return "\n".join(
        str(message.get("content") or "")
        for message in body.get("messages", [])
        if isinstance(message, dict) and message.get("role") == role
    )


def _tokens(body: dict[str, Any]) -> int:
    """About four characters a token, over the system text and every message."""
    text = str(body.get("system") or "") + "".join(
        str(m.get("content") or "") for m in body.get("messages", []) if isinstance(m, dict)
    )
    return _count(text)


def _count(text: str) -> int:
    return math.ceil(len(text) / 4)


def digest(body: object) -> str:
    return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()
