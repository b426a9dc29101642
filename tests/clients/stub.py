"""A scripted HTTP server in front of a live console, for the faults a client must survive.

Each request takes the next step of the script (the last step repeats): answer with a status
and headers, hang until released, drop the connection without answering (a console killed
mid-call), or forward to the console behind. Every request is recorded.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx

FORWARD = "forward"
HANG = "hang"
DROP = "drop"


@dataclass(frozen=True)
class Answer:
    status: int
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b'{"errors": [{"path": "", "message": "scripted"}]}'


Step = Answer | str


@dataclass
class Seen:
    path: str
    headers: dict[str, str]
    body: bytes
    at: float = field(default_factory=time.monotonic)


class Stub:
    """The script, what it saw, and the hanging requests' release."""

    def __init__(self, script: list[Step], behind: str | None = None) -> None:
        self.script, self.behind = script, behind
        self.seen: list[Seen] = []
        self.released = threading.Event()
        self._lock = threading.Lock()

    def step(self, seen: Seen) -> Step:
        with self._lock:
            self.seen.append(seen)
            return self.script[min(len(self.seen), len(self.script)) - 1]

    @property
    def keys(self) -> list[str | None]:
        return [s.headers.get("idempotency-key") for s in self.seen]


def handler_for(stub: Stub) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            step = stub.step(Seen(self.path, {k.lower(): v for k, v in self.headers.items()}, body))
            if step == DROP:
                self.close_connection = True
                self.connection.close()
                return
            if step == HANG:
                stub.released.wait(30)
                step = Answer(503)
            if step == FORWARD:
                step = self._forward(body)
            assert isinstance(step, Answer)
            self.send_response(step.status)
            for name, value in {"Content-Type": "application/json", **step.headers}.items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(step.body)))
            self.end_headers()
            self.wfile.write(step.body)

        def _forward(self, body: bytes) -> Answer:
            assert stub.behind is not None
            headers = {"Authorization": self.headers["Authorization"], "Content-Type": "application/json"}
            answer = httpx.post(stub.behind + self.path, content=body, headers=headers, timeout=30)
            return Answer(answer.status_code, {}, answer.content)

        def log_message(self, format: str, *args: object) -> None:
            pass

    return Handler


@contextmanager
def serving(script: list[Step], behind: str | None = None) -> Iterator[tuple[str, Stub]]:
    """The stub on a free port of 127.0.0.1: its base URL and its record."""
    stub = Stub(script, behind)
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler_for(stub))
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", stub
    finally:
        stub.released.set()
        server.shutdown()
        server.server_close()
