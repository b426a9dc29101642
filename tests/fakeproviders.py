"""A local judge provider: OpenAI Chat Completions and Anthropic Messages over a real socket.

The server listens on 127.0.0.1 and answers as the providers document their APIs: the same
request checks (an Anthropic request needs `anthropic-version` and `max_tokens`; thinking needs
a budget of at least 1,024 tokens below `max_tokens` and no temperature; a model registered as
taking no temperature refuses one), the same reply bodies with usage, the same error bodies.

Tests script it one reply per request, in order::

    with FakeProvider() as provider:
        provider.script(Fault(429, retry_after="1"), Answer('{"verdict": "PASS"}'))
        ... JudgeModel(base_url=provider.openai_base_url, ...) ...
        provider.requests[1].body["max_completion_tokens"]

`Drip(Answer(...), chunk=4, interval_s=0.2)` stalls as a hostile provider does: the headers at
once, then a few bytes at a time (or, with `headers_too`, the headers themselves too).

Without a script it judges on its own, deterministically: about one trace in five FAILs (by a
digest of the request's user message), with a score when the prompt asks for one. That is what
`python -m tests.fakeproviders --port 8089` serves, for the demo and browser tests: register a
judge model with baseUrl http://127.0.0.1:8089/v1 (openai) or http://127.0.0.1:8089 (anthropic).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import threading
import time
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

OPENAI_PATH = "/v1/chat/completions"
ANTHROPIC_PATH = "/v1/messages"


@dataclass(frozen=True)
class Answer:
    """A 200 reply carrying `text`, in the protocol of the endpoint that was called.

    Tokens default to about four characters a token of the request and the text.
    `cut_off` ends it with finish_reason "length" / stop_reason "max_tokens". `thinking`
    adds a thinking block (Anthropic) or reasoning tokens (OpenAI). `usage=False` leaves
    usage out, as some compatible servers do. `delay_s` answers late.
    """

    text: str | None
    input_tokens: int | None = None
    output_tokens: int | None = None
    cut_off: bool = False
    thinking: str | None = None
    usage: bool = True
    delay_s: float = 0.0


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


@dataclass
class _State:
    steps: deque[Step] = field(default_factory=deque)
    requests: list[RecordedRequest] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)


class FakeProvider:
    """The server: start it (or use it as a context manager), script it, read its requests.

    `api_key`, when set, is required (Bearer for OpenAI, x-api-key for Anthropic).
    `no_temperature_models` are model names that refuse a temperature, as reasoning models do.
    """

    def __init__(
        self,
        port: int = 0,
        *,
        api_key: str | None = None,
        no_temperature_models: Iterable[str] = (),
    ) -> None:
        self.state = _State()
        self.api_key = api_key
        self.no_temperature_models = frozenset(no_temperature_models)
        self._server = _Server(("127.0.0.1", port), _Handler)
        self._server.provider = self
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    @property
    def openai_base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def anthropic_base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def registration(self, id: str, provider: str = "openai", **fields: Any) -> dict[str, Any]:
        """A judge-model registration (wire shape) pointing at this server; `fields` override."""
        doc: dict[str, Any] = {
            "id": id,
            "provider": provider,
            "model": f"fake-{provider}-judge",
            "baseUrl": self.anthropic_base_url if provider == "anthropic" else self.openai_base_url,
            "apiKeyEnv": None,
            "pricing": {"inputUsdPerMTok": "0.40", "outputUsdPerMTok": "1.60"},
            "capabilities": ["json"],
            "sampling": True,
        }
        doc.update(fields)
        return doc

    @property
    def requests(self) -> list[RecordedRequest]:
        with self.state.lock:
            return list(self.state.requests)

    def script(self, *steps: Step) -> None:
        """Queue replies for the next requests, in order; then it judges on its own again."""
        with self.state.lock:
            self.state.steps.extend(steps)

    def reset(self) -> None:
        with self.state.lock:
            self.state.steps.clear()
            self.state.requests.clear()

    def start(self) -> FakeProvider:
        self._thread = threading.Thread(target=self.serve_forever, daemon=True)
        self._thread.start()
        return self

    def serve_forever(self) -> None:
        """Serve in this thread until interrupted (the CLI)."""
        self._server.serve_forever(poll_interval=0.05)

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> FakeProvider:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _next_step(self, request: RecordedRequest) -> Step:
        with self.state.lock:
            self.state.requests.append(request)
            return self.state.steps.popleft() if self.state.steps else _own_judgement(request)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    provider: FakeProvider


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    server_version = "fakeproviders/1"

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: tests read `requests` instead of a log."""

    def do_POST(self) -> None:
        provider = self.server.provider
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length)
        headers = {name.lower(): value for name, value in self.headers.items()}
        try:
            body = json.loads(raw)
        except ValueError:
            body = None
        request = RecordedRequest(self.path, headers, body)
        if self.path not in (OPENAI_PATH, ANTHROPIC_PATH):
            return self._send_error(request, 404, "not_found_error", f"no route {self.path}")
        refusal = _refusal(provider, request)
        if refusal is not None:
            return self._send_error(request, *refusal)
        self._perform(request, provider._next_step(request))

    def _perform(self, request: RecordedRequest, step: Step) -> None:
        if isinstance(step, Hangup):
            self.close_connection = True
            return
        if isinstance(step, Raw):
            return self._send(step.status, step.body, {"content-type": step.content_type})
        if isinstance(step, Drip):
            return self._drip(step, json.dumps(_reply(request, step.answer)).encode())
        time.sleep(step.delay_s)
        if isinstance(step, Fault):
            extra = {"retry-after": step.retry_after} if step.retry_after else {}
            return self._send_error(
                request, step.status, _error_type(step.status), step.message, extra
            )
        self._send_json(200, _reply(request, step))

    def _send_error(
        self,
        request: RecordedRequest,
        status: int,
        error_type: str,
        message: str,
        headers: dict[str, str] | None = None,
    ) -> None:
        if request.protocol == "anthropic":
            body: dict[str, Any] = {
                "type": "error",
                "error": {"type": error_type, "message": message},
            }
        else:
            body = {"error": {"message": message, "type": error_type, "param": None, "code": None}}
        self._send_json(status, body, headers)

    def _send_json(self, status: int, body: object, headers: dict[str, str] | None = None) -> None:
        self._send(
            status,
            json.dumps(body).encode(),
            {"content-type": "application/json", **(headers or {})},
        )

    def _send(self, status: int, payload: bytes, headers: dict[str, str]) -> None:
        try:
            self.send_response(status)
            for name, value in headers.items():
                self.send_header(name, value)
            self.send_header("content-length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up waiting (a timeout test): nothing to answer


    def _drip(self, step: Drip, payload: bytes) -> None:
        head = f"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {len(payload)}\r\n\r\n"
        self.close_connection = True
        try:
            if not step.headers_too:
                self.wfile.write(head.encode())
                head = ""
            data = head.encode() + payload
            for start in range(0, len(data), step.chunk):
                self.wfile.write(data[start : start + step.chunk])
                self.wfile.flush()
                time.sleep(step.interval_s)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client stopped waiting, as it should


def _error_type(status: int) -> str:
    return {
        400: "invalid_request_error",
        401: "authentication_error",
        404: "not_found_error",
        429: "rate_limit_error",
        529: "overloaded_error",
    }.get(status, "api_error")


def _refusal(provider: FakeProvider, request: RecordedRequest) -> tuple[int, str, str] | None:
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
        return (
            400,
            bad,
            "thinking.enabled.budget_tokens: Input should be greater than or equal to 1024",
        )
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


def _reply(request: RecordedRequest, answer: Answer) -> dict[str, Any]:
    input_tokens = answer.input_tokens if answer.input_tokens is not None else _tokens(request.body)
    thinking_tokens = _count(answer.thinking or "")
    output_tokens = answer.output_tokens
    if output_tokens is None:
        output_tokens = _count(answer.text or "") + thinking_tokens
    if request.protocol == "anthropic":
        return _anthropic_reply(request.body, answer, input_tokens, output_tokens)
    return _openai_reply(request.body, answer, input_tokens, output_tokens, thinking_tokens)


def _openai_reply(
    body: dict[str, Any],
    answer: Answer,
    input_tokens: int,
    output_tokens: int,
    thinking_tokens: int,
) -> dict[str, Any]:
    reply: dict[str, Any] = {
        "id": "chatcmpl-" + _digest(body)[:24],
        "object": "chat.completion",
        "created": int(time.time()),
        "model": body["model"],
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": answer.text, "refusal": None},
                "logprobs": None,
                "finish_reason": "length" if answer.cut_off else "stop",
            }
        ],
    }
    if answer.usage:
        reply["usage"] = {
            "prompt_tokens": input_tokens,
            "completion_tokens": output_tokens,
            "total_tokens": input_tokens + output_tokens,
            "completion_tokens_details": {"reasoning_tokens": thinking_tokens},
        }
    return reply


def _anthropic_reply(
    body: dict[str, Any], answer: Answer, input_tokens: int, output_tokens: int
) -> dict[str, Any]:
    content: list[dict[str, Any]] = []
    if answer.thinking is not None:
        content.append({"type": "thinking", "thinking": answer.thinking, "signature": "c2ln"})
    if answer.text is not None:
        content.append({"type": "text", "text": answer.text})
    reply: dict[str, Any] = {
        "id": "msg_" + _digest(body)[:24],
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


def _own_judgement(request: RecordedRequest) -> Answer:
    """The unscripted answer: deterministic per trace, FAIL about one time in five."""
    body = request.body
    system = body.get("system") or _message_text(body, "system")
    user = _message_text(body, "user")
    byte = hashlib.sha256(user.encode()).digest()[0]
    thinking = "Weighing the turn against the criteria." if _thinks(body) else None
    if '"score"' in system:
        return Answer(
            json.dumps({"score": round(byte / 255, 2), "reason": "scored by the fake judge"}),
            thinking=thinking,
        )
    verdict = "FAIL" if byte < 52 else "PASS"
    reason = (
        "the turn does not meet the criteria"
        if verdict == "FAIL"
        else "the turn meets the criteria"
    )
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


def _digest(body: object) -> str:
    return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, default=8089)
    parser.add_argument("--api-key", default=None, help="require this key (default: none)")
    parser.add_argument(
        "--no-temperature-model",
        action="append",
        default=[],
        metavar="MODEL",
        help="a model name that refuses a temperature, as reasoning models do",
    )
    args = parser.parse_args(argv)
    provider = FakeProvider(
        args.port, api_key=args.api_key, no_temperature_models=args.no_temperature_model
    )
    print(f"fake judge provider, openai: {provider.openai_base_url}", flush=True)
    print(f"fake judge provider, anthropic: {provider.anthropic_base_url}", flush=True)
    try:
        provider.serve_forever()
    except KeyboardInterrupt:
        provider.stop()


if __name__ == "__main__":
    main()
