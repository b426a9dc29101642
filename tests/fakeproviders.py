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

A request with `stream: true` (Chat Completions) is answered as server-sent events, the same
reply in `chat.completion.chunk` deltas. `script_model(model, ...)` queues replies for requests
naming that model only, ahead of the shared script; a client in another process (the TypeScript
tests) does the same over HTTP: `POST /fake/script` with `{"model": ..., "steps": [{"text": ...,
"toolCalls": [[name, arguments]]}]}`, and reads what was asked of a model with
`GET /fake/requests?model=...` (the request bodies, in order).

`Drip(Answer(...), chunk=4, interval_s=0.2)` stalls as a hostile provider does: the headers at
once, then a few bytes at a time (or, with `headers_too`, the headers themselves too).

Without a script it judges on its own, deterministically: about one trace in five FAILs (by a
digest of the request's user message), with a score when the prompt asks for one. That is what
`python -m tests.fakeproviders --port 8089` serves, for the demo and browser tests: register a
judge model with baseUrl http://127.0.0.1:8089/v1 (openai) or http://127.0.0.1:8089 (anthropic).
"""

from __future__ import annotations

import argparse
import json
import threading
import time
from collections import defaultdict, deque
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

from tests.fakeprovider_protocol import (
    ANTHROPIC_PATH,
    OPENAI_PATH,
    Answer,
    Drip,
    Fault,
    Hangup,
    Raw,
    RecordedRequest,
    Step,
    error_type,
    own_judgement,
    refusal,
    reply,
    stream_events,
)

__all__ = ["Answer", "Drip", "FakeProvider", "Fault", "Hangup", "Raw", "RecordedRequest", "Step"]


@dataclass
class _State:
    steps: deque[Step] = field(default_factory=deque)
    by_model: defaultdict[str, deque[Step]] = field(default_factory=lambda: defaultdict(deque))
    requests: list[RecordedRequest] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)


class FakeProvider:
    """The server: start it (or use it as a context manager), script it, read its requests.

    `api_key`, when set, is required (Bearer for OpenAI, x-api-key for Anthropic).
    `no_temperature_models` are model names that refuse a temperature, as reasoning models do.
    `delay_s`: how long it takes to judge on its own (unscripted answers).
    """

    def __init__(
        self,
        port: int = 0,
        *,
        api_key: str | None = None,
        no_temperature_models: Iterable[str] = (),
        delay_s: float = 0.0,
    ) -> None:
        self.state = _State()
        self.delay_s = delay_s
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

    def script_model(self, model: str, *steps: Step) -> None:
        """Queue replies for the next requests naming `model`, ahead of the shared script."""
        with self.state.lock:
            self.state.by_model[model].extend(steps)

    def reset(self) -> None:
        with self.state.lock:
            self.state.steps.clear()
            self.state.by_model.clear()
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
            mine = self.state.by_model.get(str(request.body.get("model")))
            if mine:
                return mine.popleft()
            if self.state.steps:
                return self.state.steps.popleft()
        return replace(own_judgement(request), delay_s=self.delay_s)


#: The test's own routes, beside the providers' (not part of any provider's API).
SCRIPT_PATH = "/fake/script"
REQUESTS_PATH = "/fake/requests"


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
        if self.path == SCRIPT_PATH:
            return self._script(body)
        if self.path not in (OPENAI_PATH, ANTHROPIC_PATH):
            return self._send_error(request, 404, "not_found_error", f"no route {self.path}")
        refused = refusal(provider, request)
        if refused is not None:
            return self._send_error(request, *refused)
        self._perform(request, provider._next_step(request))

    def do_GET(self) -> None:
        """`GET /fake/requests?model=`: the bodies of the requests naming that model, in order."""
        url = urlsplit(self.path)
        if url.path != REQUESTS_PATH:
            return self._send_json(404, {"error": {"message": f"no route {url.path}"}})
        model = parse_qs(url.query).get("model", [""])[0]
        bodies = [
            r.body for r in self.server.provider.requests if isinstance(r.body, dict) and r.body.get("model") == model
        ]
        self._send_json(200, bodies)

    def _script(self, body: Any) -> None:
        """`POST /fake/script`: queue a model's replies, as `script_model` does."""
        try:
            model, steps = body["model"], body["steps"]
            answers = [
                Answer(step.get("text"), tool_calls=tuple((name, args) for name, args in step.get("toolCalls", [])))
                for step in steps
            ]
        except (KeyError, TypeError, ValueError, AttributeError):
            message = 'the body is {"model": str, "steps": [{"text": str | null, "toolCalls": [[name, arguments]]}]}'
            return self._send_json(400, {"error": {"message": message}})
        self.server.provider.script_model(str(model), *answers)
        self._send_json(200, {"model": model, "queued": len(answers)})

    def _perform(self, request: RecordedRequest, step: Step) -> None:
        if isinstance(step, Hangup):
            self.close_connection = True
            return
        if isinstance(step, Raw):
            return self._send(step.status, step.body, {"content-type": step.content_type})
        if isinstance(step, Drip):
            return self._drip(step, json.dumps(reply(request, step.answer)).encode())
        time.sleep(step.delay_s)
        if isinstance(step, Fault):
            extra = {"retry-after": step.retry_after} if step.retry_after else {}
            return self._send_error(request, step.status, error_type(step.status), step.message, extra)
        if request.protocol == "openai" and request.body.get("stream") is True:
            return self._send_events(request, step)
        self._send_json(200, reply(request, step))

    def _send_events(self, request: RecordedRequest, answer: Answer) -> None:
        """The reply as server-sent events, the connection closed after `data: [DONE]`."""
        events = stream_events(reply(request, answer), answer)
        options = request.body.get("stream_options")
        if not (isinstance(options, dict) and options.get("include_usage")):
            events = [event for event in events if event["choices"]]
        self.close_connection = True
        try:
            self.send_response(200)
            self.send_header("content-type", "text/event-stream")
            self.send_header("cache-control", "no-cache")
            self.end_headers()
            for event in events:
                self.wfile.write(f"data: {json.dumps(event)}\n\n".encode())
                self.wfile.flush()
            self.wfile.write(b"data: [DONE]\n\n")
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client stopped reading

    def _send_error(
        self,
        request: RecordedRequest,
        status: int,
        error_type: str,
        message: str,
        headers: dict[str, str] | None = None,
    ) -> None:
        if request.protocol == "anthropic":
            body: dict[str, Any] = {"type": "error", "error": {"type": error_type, "message": message}}
        else:
            body = {"error": {"message": message, "type": error_type, "param": None, "code": None}}
        self._send_json(status, body, headers)

    def _send_json(self, status: int, body: object, headers: dict[str, str] | None = None) -> None:
        self._send(status, json.dumps(body).encode(), {"content-type": "application/json", **(headers or {})})

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
    provider = FakeProvider(args.port, api_key=args.api_key, no_temperature_models=args.no_temperature_model)
    print(f"fake judge provider, openai: {provider.openai_base_url}", flush=True)
    print(f"fake judge provider, anthropic: {provider.anthropic_base_url}", flush=True)
    try:
        provider.serve_forever()
    except KeyboardInterrupt:
        provider.stop()


if __name__ == "__main__":
    main()
