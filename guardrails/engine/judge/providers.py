"""The two provider protocols a judge speaks: request bodies and reply parsing.

OpenAI Chat Completions (`provider: "openai"`, also served by vLLM, Ollama and llama.cpp):
``POST {baseUrl}/chat/completions`` with ``Authorization: Bearer <key>``; the answer limit is
`max_completion_tokens`; a thinking model gets its lowest `reasoning_effort`. The reply's text is
``choices[0].message.content``, ``finish_reason: "length"`` means it was cut off, and usage is
``prompt_tokens`` / ``completion_tokens``.

Anthropic Messages (`provider: "anthropic"`): ``POST {baseUrl}/v1/messages`` with `x-api-key` and
`anthropic-version`; the limit is `max_tokens`; a thinking model gets
``thinking: {"type": "enabled", "budget_tokens": <its minimum>}`` and no temperature (the API
refuses one with thinking). The reply's text is its `text` content blocks (thinking blocks are
not the answer), ``stop_reason: "max_tokens"`` means it was cut off, and usage is
``input_tokens`` / ``output_tokens``.

The answer gets ANSWER_TOKENS; thinking counts against the same limit, so a thinking model gets
THINKING_TOKENS more. Temperature is 0 unless the model takes none (`sampling: false`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .models import JudgeModel
from .prompt import JudgePrompt

ANSWER_TOKENS = 256
THINKING_TOKENS = 2048
ANTHROPIC_VERSION = "2023-06-01"


class ProviderProtocolError(ValueError):
    """A provider reply that is not shaped as its protocol documents."""


@dataclass(frozen=True, slots=True)
class ProviderRequest:
    """One HTTP request to a provider. `headers` may hold the key: never log them."""

    url: str
    headers: dict[str, str]
    body: dict[str, Any]


@dataclass(frozen=True, slots=True)
class ProviderReply:
    """A provider's successful reply: the answer text, its usage, and whether it was cut off."""

    text: str | None
    input_tokens: int | None
    output_tokens: int | None
    cut_off: bool
    stop_reason: str | None

    @property
    def billed(self) -> bool:
        """A reply that reports usage was paid for, whatever its text says."""
        return self.input_tokens is not None or self.output_tokens is not None


def output_limit(model: JudgeModel) -> int:
    """The token limit of a judge answer on `model`, thinking included."""
    return ANSWER_TOKENS + (THINKING_TOKENS if model.thinking is not None else 0)


def build_request(model: JudgeModel, prompt: JudgePrompt, api_key: str | None) -> ProviderRequest:
    """The request that asks `model` for a verdict on `prompt`."""
    if model.provider == "anthropic":
        return _anthropic_request(model, prompt, api_key)
    return _openai_request(model, prompt, api_key)


def parse_reply(model: JudgeModel, body: object) -> ProviderReply:
    """The reply of a 2xx response body; raises ProviderProtocolError when malformed."""
    if not isinstance(body, Mapping):
        raise ProviderProtocolError("the provider's reply is not a JSON object")
    if model.provider == "anthropic":
        return _anthropic_reply(body)
    return _openai_reply(body)


def reply_usage(model: JudgeModel, body: object) -> tuple[int | None, int | None]:
    """The (input, output) tokens a reply reports, even when the rest of it is malformed."""
    if not isinstance(body, Mapping):
        return None, None
    if model.provider == "anthropic":
        return _usage(body, "input_tokens", "output_tokens")
    return _usage(body, "prompt_tokens", "completion_tokens")


def error_message(body: object) -> str | None:
    """The message of a provider's error body (both protocols nest it under `error`)."""
    error = body.get("error") if isinstance(body, Mapping) else None
    if isinstance(error, Mapping) and isinstance(error.get("message"), str):
        return str(error["message"])[:500]
    return None


def _openai_request(model: JudgeModel, prompt: JudgePrompt, api_key: str | None) -> ProviderRequest:
    body: dict[str, Any] = {
        "model": model.model,
        "messages": [{"role": "system", "content": prompt.system}, {"role": "user", "content": prompt.user}],
        "max_completion_tokens": output_limit(model),
    }
    if model.thinking is not None:
        body["reasoning_effort"] = model.thinking.effort
    if model.sampling:
        body["temperature"] = 0
    headers = {"content-type": "application/json"}
    if api_key:
        headers["authorization"] = f"Bearer {api_key}"
    return ProviderRequest(f"{model.base_url}/chat/completions", headers, body)


def _anthropic_request(model: JudgeModel, prompt: JudgePrompt, api_key: str | None) -> ProviderRequest:
    body: dict[str, Any] = {
        "model": model.model,
        "max_tokens": output_limit(model),
        "system": prompt.system,
        "messages": [{"role": "user", "content": prompt.user}],
    }
    if model.thinking is not None:
        body["thinking"] = {"type": "enabled", "budget_tokens": model.thinking.budget_tokens}
    elif model.sampling:
        body["temperature"] = 0
    headers = {"content-type": "application/json", "anthropic-version": ANTHROPIC_VERSION}
    if api_key:
        headers["x-api-key"] = api_key
    return ProviderRequest(f"{model.base_url}/v1/messages", headers, body)


def _openai_reply(body: Mapping[str, Any]) -> ProviderReply:
    input_tokens, output_tokens = _usage(body, "prompt_tokens", "completion_tokens")
    choices = body.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], Mapping):
        raise ProviderProtocolError("the provider's reply has no choices")
    message = choices[0].get("message")
    content = message.get("content") if isinstance(message, Mapping) else None
    finish = choices[0].get("finish_reason")
    return ProviderReply(
        text=_openai_text(content),
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        cut_off=finish == "length",
        stop_reason=finish if isinstance(finish, str) else None,
    )


def _openai_text(content: object) -> str | None:
    """Message content: a string, or (some compatible servers) a list of text parts."""
    if isinstance(content, str) or content is None:
        return content
    if isinstance(content, list):
        return "".join(
            str(part.get("text", "")) for part in content if isinstance(part, Mapping) and part.get("type") == "text"
        )
    raise ProviderProtocolError("the provider's message content is neither text nor parts")


def _anthropic_reply(body: Mapping[str, Any]) -> ProviderReply:
    input_tokens, output_tokens = _usage(body, "input_tokens", "output_tokens")
    content = body.get("content")
    if not isinstance(content, list):
        raise ProviderProtocolError("the provider's reply has no content blocks")
    # Thinking and redacted_thinking blocks are the model's working, not its answer.
    texts = [
        str(block.get("text", "")) for block in content if isinstance(block, Mapping) and block.get("type") == "text"
    ]
    stop = body.get("stop_reason")
    return ProviderReply(
        text="".join(texts) if texts else None,
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        cut_off=stop == "max_tokens",
        stop_reason=stop if isinstance(stop, str) else None,
    )


def _usage(body: Mapping[str, Any], input_key: str, output_key: str) -> tuple[int | None, int | None]:
    usage = body.get("usage")
    if not isinstance(usage, Mapping):
        return None, None
    return _count(usage.get(input_key)), _count(usage.get(output_key))


def _count(value: object) -> int | None:
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    return None
