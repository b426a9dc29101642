"""Fixtures shared by the traces tests."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from guardrails.services import Author, save_guardrail
from tests.conftest import make_guardrail
from tests.traces import workers
from tests.traces.workers import ROOT, RedisServer, free_port, serving


@pytest.fixture
def guardrails(db: Any) -> list[Any]:
    """Three console-wide guardrails: a halting one, a citation check that only logs, and one
    scoped to the billing flow."""
    author = Author(user=None, label="fixture")
    return [
        save_guardrail(make_guardrail(), author),
        save_guardrail(
            make_guardrail(
                "cite", check="must-cite", config={"min": 1}, action={"on-violation": "log-only"}, severity="warn"
            ),
            author,
        ),
        save_guardrail(make_guardrail("billing-only", scope={"flows": ["billing"]}), author),
    ]


@pytest.fixture
def redis_server() -> Iterator[RedisServer]:
    server = RedisServer()
    server.start()
    yield server
    server.stop()


@pytest.fixture
def web(redis_server: RedisServer, tmp_path: Path) -> Iterator[str]:
    """`manage.py runserver` on the test database, its broker the test's own Redis."""
    port = free_port()
    environ = {
        **os.environ,
        "DATABASE_URL": workers.test_database_url(),
        "CELERY_BROKER_URL": redis_server.url,
        "CELERY_TASK_ALWAYS_EAGER": "false",
    }
    with (tmp_path / "web.log").open("wb") as log:
        process = subprocess.Popen(
            [sys.executable, "manage.py", "runserver", "--noreload", f"127.0.0.1:{port}"],
            cwd=ROOT,
            env=environ,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    with serving(process, port, 60, "the web server to start"):
        yield f"http://127.0.0.1:{port}"
