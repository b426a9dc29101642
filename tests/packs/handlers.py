"""Check handlers that misbehave on purpose, for the sandbox tests (evaluate functions)."""

from __future__ import annotations

import os
import socket
import time
from typing import Any

from guardrails.engine.types import PASSED, CheckOutcome, failed


def says_hello(config: Any, trace: Any) -> CheckOutcome:
    """Pass when the output contains the configured word."""
    word = config.get("word", "hello")
    return PASSED if word in (trace.get("output") or "") else failed(f"no {word!r} in output")


def allocates(config: Any, trace: Any) -> CheckOutcome:
    """Allocate `mb` megabytes and keep them."""
    block = bytearray(config["mb"] * 1024 * 1024)
    return PASSED if block else failed("empty")


def loops_forever(config: Any, trace: Any) -> CheckOutcome:
    while True:
        pass


def sleeps(config: Any, trace: Any) -> CheckOutcome:
    time.sleep(config.get("seconds", 60))
    return PASSED


def connects(config: Any, trace: Any) -> CheckOutcome:
    """Connect to the configured host and port, send a line and read the answer."""
    with socket.create_connection((config["host"], config["port"]), timeout=5) as sock:
        sock.sendall(b"ping\n")
        answer = sock.recv(100)
    return PASSED if answer == b"pong\n" else failed(f"answer {answer!r}")


def half_closes(config: Any, trace: Any) -> CheckOutcome:
    """Send a line, close the sending side, then read the answer to its end."""
    with socket.create_connection((config["host"], config["port"]), timeout=5) as sock:
        sock.sendall(b"ping\n")
        sock.shutdown(socket.SHUT_WR)
        answer = b""
        while chunk := sock.recv(100):
            answer += chunk
    return PASSED if answer == b"pong\n" else failed(f"answer {answer!r}")


def reads_environment(config: Any, trace: Any) -> CheckOutcome:
    """Fail with the environment's names, so that the test sees exactly what was visible."""
    return failed("environment", names=sorted(os.environ), values=dict(os.environ))


def raises(config: Any, trace: Any) -> CheckOutcome:
    raise ValueError("the check's own bug")


def kills_itself(config: Any, trace: Any) -> CheckOutcome:
    os.kill(os.getpid(), 9)
    return PASSED


def reads_console_environ(config: Any, trace: Any) -> CheckOutcome:
    """Try to read the evaluating process's environment through /proc."""
    with open(f"/proc/{config['pid']}/environ", "rb") as environ:
        return failed(f"read {len(environ.read())} bytes")


def kills_parent(config: Any, trace: Any) -> CheckOutcome:
    os.kill(config["pid"], 0)
    return failed("signalled another process")
