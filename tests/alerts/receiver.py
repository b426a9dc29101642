"""A live HTTP receiver of webhooks on 127.0.0.1 (real sockets), for the alert tests.

It answers each request with the next status of its script (the last one repeats), or
with what `answer` says of the request, or holds the request for `hang_seconds` first (a
receiver that times out), and keeps every request with whether its Standard Webhooks
signature verified against `secret`. `host` and `port` choose where it listens (another
address of the loopback range, the port of another receiver); `tls` (a certificate and its
key, one PEM file) makes it answer HTTPS.
"""

from __future__ import annotations

import json
import ssl
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from standardwebhooks.webhooks import Webhook, WebhookVerificationError


@dataclass
class Received:
    headers: dict[str, str]
    body: bytes
    verified: bool
    status: int

    @property
    def json(self) -> Any:
        return json.loads(self.body)


@dataclass
class Receiver:
    statuses: list[int] = field(default_factory=lambda: [200])
    hang_seconds: float = 0.0
    hang_requests: int | None = None  # only the first N requests hang (None: all)
    secret: str | None = None
    # The status of a request from its headers and body (instead of `statuses`).
    answer: Callable[[dict[str, str], bytes], int] | None = None
    host: str = "127.0.0.1"
    port: int = 0
    tls: str | None = None
    requests: list[Received] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.lock = threading.Lock()
        self.server = ThreadingHTTPServer((self.host, self.port), self._handler())
        self.server.daemon_threads = True
        if self.tls is not None:
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(self.tls)
            self.server.socket = context.wrap_socket(self.server.socket, server_side=True)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def bound_port(self) -> int:
        return int(self.server.server_address[1])

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.bound_port}/hook"

    def __enter__(self) -> Receiver:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()

    def verify(self, headers: dict[str, str], body: bytes) -> bool:
        if self.secret is None:
            return False
        try:
            Webhook(self.secret).verify(body, headers)
        except WebhookVerificationError:
            return False
        return True

    def _next_status(self) -> int:
        with self.lock:
            index = min(len(self.requests), len(self.statuses) - 1)
            return self.statuses[index]

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length", 0)))
                headers = {name.lower(): value for name, value in self.headers.items()}
                status = receiver.answer(headers, body) if receiver.answer else receiver._next_status()
                with receiver.lock:
                    receiver.requests.append(Received(headers, body, receiver.verify(headers, body), status))
                with receiver.lock:
                    number = len(receiver.requests)
                if receiver.hang_seconds and (receiver.hang_requests is None or number <= receiver.hang_requests):
                    time.sleep(receiver.hang_seconds)
                try:
                    self.send_response(status)
                    self.send_header("content-type", "text/plain")
                    self.end_headers()
                    self.wfile.write(f"answered {status}".encode())
                except OSError:
                    pass  # the sender gave up (its deadline)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        return Handler
