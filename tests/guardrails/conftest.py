"""Fixtures for the sandbox tests: a warm pool and a TCP listener on 127.0.0.1."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from guardrails.engine.sandbox import SandboxDefaults, SandboxPool

SECRET_ENV = {"KINDGI_TEST_TOKEN": "s3cret", "KINDGI_TEST_REGION": "eu", "DATABASE_URL": "pg://x"}


@pytest.fixture(scope="module")
def pool() -> Iterator[SandboxPool]:
    defaults = SandboxDefaults(mem_mb=64, cpu_ms=200, pool_size=2)
    with SandboxPool(defaults, environ=SECRET_ENV) as pool:
        yield pool


class Listener:
    """Answers `pong` to each connection and counts them."""

    def __init__(self) -> None:
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        self.connections = 0
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.server.accept()
            except OSError:
                return
            self.connections += 1
            with conn:
                conn.recv(100)
                conn.sendall(b"pong\n")

    def close(self) -> None:
        self.server.close()


@pytest.fixture
def listener() -> Iterator[Listener]:
    server = Listener()
    yield server
    server.close()


@pytest.fixture
def deployment_pool() -> Iterator[SandboxPool]:
    """The console's own pool (guardrails.deployment), fresh for the test and shut down after.

    Fresh, because a pool hands its workers the import path it had when it was made.
    """
    from guardrails import deployment

    deployment.sandbox_pool.cache_clear()
    pool = deployment.sandbox_pool()
    yield pool
    pool.shutdown()
    deployment.sandbox_pool.cache_clear()


SHORT_OUTPUT_CHECK = """
from guardrails.engine.registry import define_check
from guardrails.engine.types import PASSED, failed

def short_output(config, trace):
    output = trace.get("output") or ""
    return PASSED if len(output) <= config["max"] else failed(f"{len(output)} characters")

CHECKS = [define_check("short-output", "zero-llm", short_output,
                       config_schema={"type": "object", "required": ["max"]})]
"""


@pytest.fixture
def check_file(tmp_path: Path) -> str:
    """A filesystem check module defining `short-output` (fails an output over `max` characters)."""
    path = tmp_path / "short_output.py"
    path.write_text(textwrap.dedent(SHORT_OUTPUT_CHECK))
    return str(path)


def manage_guardrail_ci(
    tmp_path: Path, guardrails: list[dict[str, Any]], traces: list[dict[str, Any]], packs: str, timeout: int
) -> subprocess.CompletedProcess[str]:
    """`manage.py guardrail_ci --format json` in its own process, over these guardrails and
    traces, with the check packs `packs` (KINDGI_CHECK_PACKS)."""
    guardrails_file = tmp_path / "guardrails.json"
    guardrails_file.write_text(json.dumps(guardrails))
    traces_file = tmp_path / "traces.jsonl"
    traces_file.write_text("".join(json.dumps(trace) + "\n" for trace in traces))
    return subprocess.run(
        [
            sys.executable,
            "manage.py",
            "guardrail_ci",
            "--guardrails",
            str(guardrails_file),
            "--traces",
            str(traces_file),
            "--format",
            "json",
        ],
        cwd=Path(__file__).resolve().parents[2],
        env={**os.environ, "KINDGI_CHECK_PACKS": packs},
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def oci(version: str) -> dict[str, str]:
    """An OCI code artifact reference to the greetings pack at `version`."""
    return {
        "kind": "oci",
        "imageRef": "registry.example/packs/greetings",
        "modulePath": "tests.packs.greetings",
        "artifactVersion": version,
    }
