"""`make run` (runconsole) on a port another process holds says so, before announcing anything."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

from tests.traces.workers import free_port

ROOT = Path(__file__).resolve().parents[2]


def runconsole(addrport: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "manage.py", "runconsole", addrport, "--no-worker"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )


def test_it_refuses_a_busy_port_before_printing_the_address() -> None:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        result = runconsole(f"127.0.0.1:{port}")
    assert result.returncode != 0
    assert f"port {port} on 127.0.0.1 is busy" in result.stderr
    assert "PORT=8001 make run" in result.stderr
    assert "is at" not in result.stdout
    assert "Traceback" not in result.stderr


def test_it_refuses_an_address_that_is_not_one() -> None:
    result = runconsole("127.0.0.1:http-alt-nope")
    assert result.returncode != 0
    assert "is not an address to serve on" in result.stderr
    assert "is at" not in result.stdout


def test_a_free_port_is_announced_and_served() -> None:
    # A free port can be taken by another process of this machine between the probe and the
    # console's start; the console then says so (the test above), and another port is tried.
    for _ in range(5):
        port = free_port()
        process = subprocess.Popen(
            [sys.executable, "manage.py", "runconsole", f"127.0.0.1:{port}", "--no-worker"],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        try:
            assert process.stdout is not None and process.stderr is not None
            lines = [process.stdout.readline() for _ in range(3)]
            if not any(lines) and process.wait(timeout=30) != 0:
                errors = process.stderr.read()
                if f"port {port} on 127.0.0.1 is busy" in errors:
                    continue
                raise AssertionError(f"runconsole stopped before announcing the console: {errors}")
            assert f"Kindgi Console is at http://127.0.0.1:{port}/\n" in lines
            return
        finally:
            if process.poll() is None:
                process.terminate()
                process.wait(timeout=15)
    raise AssertionError("every free port found was taken before the console could start")


def test_make_run_checks_the_port_before_migrating() -> None:
    """`make run` stops at its first step, before the migrations and the demo data."""
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        result = subprocess.run(
            ["make", "--no-print-directory", "run", f"PORT={port}", f"PY={sys.executable}"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert result.returncode != 0
    assert f"port {port} on 127.0.0.1 is busy" in result.stderr
    assert "migrate" not in result.stdout
    assert "is at" not in result.stdout
