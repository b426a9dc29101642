"""Shared fixtures for the whole suite.

The tenancy cast, as in healthchecks: alice (author in acme) owns the data, bob (reviewer
in acme) reads it, charlie (author in globex) must see none of it. Each has API keys.
"""

from __future__ import annotations

import contextlib
import copy
import io
import json
import os
import shutil
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.cache import cache
from django.test import Client
from rest_framework.test import APIClient

from guardrails.engine.cli import run_guardrail_ci
from kindgi_console.tenancy.models import ApiKey, Membership, Tenant
from tests.fakeproviders import FakeProvider


def pytest_sessionstart(session: pytest.Session) -> None:
    """In CI (KINDGI_REQUIRE_SERVICES=1) the suite must run on PostgreSQL and Redis: stop at once otherwise."""
    from django.conf import settings

    if os.environ.get("PYTEST_XDIST_WORKER"):  # the process's own var folder: last session's metrics files go
        shutil.rmtree(settings.KINDGI_METRICS_DIR, ignore_errors=True)
        settings.KINDGI_METRICS_DIR.mkdir(parents=True, exist_ok=True)
    if os.environ.get("KINDGI_REQUIRE_SERVICES") != "1":
        return

    database = settings.DATABASES["default"]["ENGINE"]
    broker = settings.CELERY_BROKER_URL
    if "postgresql" not in database or not broker.startswith("redis://"):
        pytest.exit(f"CI needs PostgreSQL and Redis, got {database} and {broker}", returncode=3)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--only-declared-skips",
        action="store_true",
        help="fail a test that skips, unless it is a `postgresql` test off PostgreSQL or a `redis` one off Redis (CI)",
    )


def on_postgresql() -> bool:
    from django.conf import settings

    return "postgresql" in settings.DATABASES["default"]["ENGINE"]


def on_redis() -> bool:
    from django.conf import settings

    return str(settings.CELERY_BROKER_URL).startswith(("redis://", "rediss://"))


def on_sqlite() -> bool:
    return not on_postgresql()


def declared_skip(item: pytest.Item) -> str | None:
    """Why `item` skips here, when it is a `postgresql` test off PostgreSQL or a `redis` test
    off Redis (the embedded default: CI's PostgreSQL and Redis pass runs it), or a `sqlite`
    test on PostgreSQL (CI's embedded-default pass runs it)."""
    passes = (
        ("postgresql", on_postgresql, "PostgreSQL", "CI's PostgreSQL and Redis pass"),
        ("redis", on_redis, "Redis", "CI's PostgreSQL and Redis pass"),
        ("sqlite", on_sqlite, "SQLite", "CI's embedded-default pass"),
    )
    for name, present, service, other in passes:
        mark = item.get_closest_marker(name)
        if mark is not None and not present():
            return f"{service} only ({mark.args[0]}): {other} runs it"
    return None


def pytest_runtest_setup(item: pytest.Item) -> None:
    if reason := declared_skip(item):
        pytest.skip(reason)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    """With --only-declared-skips (CI), any other skip is a failure: the PostgreSQL and Redis
    pass skips nothing, the embedded default's only the tests of those two services."""
    report: Any = yield
    strict = item.config.getoption("only_declared_skips") and not hasattr(report, "wasxfail")
    if strict and report.skipped and declared_skip(item) is None:
        report.outcome = "failed"
        report.longrepr = f"skipped in CI, where only the tests of a missing service may skip: {report.longrepr}"
    return report


def pytest_configure(config: pytest.Config) -> None:
    """Passwords hashed with one cheap round in tests: PBKDF2's million iterations cost about
    a second per user made or signed in on a small machine (Django's advice for test suites)."""
    from django.conf import settings

    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


# Modules whose tests bound wall-clock or CPU time (deadlines, sandbox limits): under
# pytest-xdist (`make test`, `--dist loadgroup`) they run one after another in one process,
# never against each other (tests/scheduling.py).
TIMED_MODULES = (
    "tests/guardrails/test_sandbox_parity.py",
    "tests/guardrails/test_sandbox_hostile.py",
    "tests/guardrails/test_judge_hardening.py",
    "tests/guardrails/test_judge_client.py",
    "tests/traces/test_judge_hardening.py",
    "tests/traces/test_broker_down.py",
    "tests/traces/test_otlp_limits.py",
    "tests/traces/test_request_deadlines.py",
    "tests/alerts/test_worker_queues.py",
    "tests/traces/test_broker_restart.py",
    # Its tests share clients/typescript/node_modules (npm ci) and dist/; its JS tests bound deadlines.
    "tests/clients/test_typescript_client.py",
)


# Modules whose tests share a costly module fixture (an install, a server of their own):
# under pytest-xdist each runs whole in one process, so that the fixture is made once.
SHARED_MODULES = (
    "tests/deploy/test_production_install.py",
    "tests/deploy/test_api_never_redirects.py",
    "tests/guardrails/test_engine_distribution.py",
    "tests/browser/test_sso.py",
)


# The longest modules (real workers, a 200,000-line upload, the demo, schemathesis): under
# pytest-xdist they are handed out first, so that no process is left with one at the end.
LONG_MODULES = (
    "tests/traces/test_upload_workers.py",
    "tests/traces/test_worker_recovery.py",
    "tests/traces/test_judged_runs.py",
    "tests/traces/test_run_figures.py",
    "tests/alerts/test_live_delivery.py",
    "tests/traces/test_worker_heartbeat.py",
    "tests/traces/test_load_demo.py",
    "tests/upgrade/test_upgrade.py",
    *TIMED_MODULES,
    "tests/test_api_openapi.py",
)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """`--dist loadgroup`: the timed modules together in one process, each shared module in
    one process (tests/scheduling.py)."""
    if config.getvalue("dist") != "loadgroup":
        return None
    from tests.scheduling import TimedModulesTogether

    return TimedModulesTogether(config, log, TIMED_MODULES, SHARED_MODULES)


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under pytest-xdist: the longest first, after pytest-django's order (plain tests before
    transactional ones)."""
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        return
    items.sort(
        key=lambda item: LONG_MODULES.index(_module(item)) if _module(item) in LONG_MODULES else len(LONG_MODULES)
    )


def _module(item: pytest.Item) -> str:
    return item.nodeid.split("::", 1)[0]


@pytest.fixture(autouse=True)
def _fresh_throttle_cache() -> None:
    """Throttle counters live in the cache: each test starts with none. On Redis only the
    console's keys go (a flush of the database could take the broker's with it)."""
    from django.core.cache import caches
    from django.core.cache.backends.redis import RedisCache

    backend = caches["default"]
    if not isinstance(backend, RedisCache):
        with contextlib.suppress(RuntimeError):  # the database cache, in a test without it
            cache.clear()
        return
    client = backend._cache.get_client(None, write=True)
    keys = list(client.scan_iter(match=backend.make_key("*")))
    if keys:
        client.delete(*keys)


@pytest.fixture(autouse=True)
def _eager_tasks() -> Iterator[None]:
    """Tasks run in the test's process, when sent (the worker tests start real workers)."""
    from kindgi_console.celery import app

    app.conf.task_always_eager = True
    yield
    app.conf.task_always_eager = True


@pytest.fixture
def acme(db: Any) -> Tenant:
    return Tenant.objects.create(slug="acme", name="Acme")


@pytest.fixture
def globex(db: Any) -> Tenant:
    return Tenant.objects.create(slug="globex", name="Globex")


def member(username: str, tenant: Tenant, role: str) -> User:
    user = User.objects.create_user(username, f"{username}@example.org", "correct horse 42")
    Membership.objects.create(user=user, tenant=tenant, role=role)
    return user


@pytest.fixture
def alice(acme: Tenant) -> User:
    return member("alice", acme, "author")


@pytest.fixture
def bob(acme: Tenant) -> User:
    return member("bob", acme, "reviewer")


@pytest.fixture
def dana(acme: Tenant) -> User:
    """acme's admin: sets acme's judge policy, may not register judge models."""
    return member("dana", acme, "admin")


@pytest.fixture
def root(db: Any) -> User:
    """A superuser: registers judge models."""
    return User.objects.create_superuser("root", "root@example.org", "correct horse 42")


def together(send: Callable[[], None], count: int = 2) -> None:
    """Run `send` in `count` threads at once and wait for them all."""
    threads = [threading.Thread(target=send) for _ in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


def signed_in(user: Any) -> Client:
    """A test client with `user` signed in."""
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def charlie(globex: Tenant) -> User:
    return member("charlie", globex, "author")


RUNTIME_SCOPES = ["ingest", "evaluate", "read"]


@pytest.fixture
def acme_key(acme: Tenant) -> str:
    """A runtime's key for acme (ingest, evaluate, read)."""
    return ApiKey.issue(scopes=RUNTIME_SCOPES, tenant=acme, name="acme runtime")[1]


@pytest.fixture
def charlie_key(globex: Tenant) -> str:
    """charlie's runtime key, for globex: must see nothing of acme."""
    return ApiKey.issue(scopes=RUNTIME_SCOPES, tenant=globex, name="globex runtime")[1]


@pytest.fixture
def author_key(db: Any) -> str:
    """A key bound to no tenant that authors guardrails (a CI publisher)."""
    return ApiKey.issue(scopes=["author", "read"], name="publisher")[1]


@pytest.fixture
def api() -> Callable[..., APIClient]:
    """A client signed in as a user, or carrying an API key, or neither."""

    def make(who: User | str | None = None) -> APIClient:
        client = APIClient()
        if isinstance(who, User):
            client.force_login(who)
        elif isinstance(who, str):
            client.credentials(HTTP_AUTHORIZATION=f"Bearer {who}")
        return client

    return make


TRACE: dict[str, Any] = {
    "id": "run-0001",
    "agent": "support-bot",
    "flow": "refund",
    "startedAt": "2026-11-29T10:00:00Z",
    "endedAt": "2026-11-29T10:00:04Z",
    "input": "Can I get a refund for order 1234?",
    "output": "Yes: orders can be refunded within 30 days [policy-refunds].",
    "messages": [
        {"role": "user", "content": "Can I get a refund for order 1234?"},
        {"role": "assistant", "content": "Yes: orders can be refunded within 30 days."},
    ],
    "toolCalls": [
        {"id": "c1", "name": "lookup_order", "arguments": {"order": "1234"}, "result": {"status": "delivered"}},
        {"id": "c2", "name": "issue_refund", "arguments": {"order": "1234"}, "result": "ok"},
    ],
    "usage": {"inputTokens": 812, "outputTokens": 40, "costUsd": 0.0021, "model": "m"},
}


def make_trace(trace_id: str = "run-0001", **fields: Any) -> dict[str, Any]:
    """The runtrace.md example under `trace_id`, with `fields` replaced."""
    trace = copy.deepcopy(TRACE)
    trace["id"] = trace_id
    trace.update(fields)
    return trace


def make_guardrail(guardrail_id: str = "no-refunds", **fields: Any) -> dict[str, Any]:
    """A zero-llm guardrail that halts a turn calling issue_refund."""
    document: dict[str, Any] = {
        "id": guardrail_id,
        "name": "Never refund without a human",
        "kind": "zero-llm",
        "check": "never-call-tool",
        "config": {"tools": ["issue_refund"]},
        "action": {"on-violation": "halt"},
        "severity": "critical",
    }
    document.update(fields)
    return document


@pytest.fixture
def trace() -> Callable[..., dict[str, Any]]:
    return make_trace


@pytest.fixture
def halt_guardrail(db: Any) -> Any:
    """An enabled guardrail that halts turns calling issue_refund."""
    from guardrails.services import Author, save_guardrail

    return save_guardrail(make_guardrail(), Author(user=None, label="fixture"))


@pytest.fixture
def acme_guardrail(acme: Tenant) -> Any:
    """The same guardrail, owned by acme: alice writes it, charlie does not see it."""
    from guardrails.services import Author, save_guardrail

    return save_guardrail(make_guardrail(), Author(user=None, label="fixture"), owner=acme)


@pytest.fixture
def fake_provider() -> Iterator[FakeProvider]:
    """A judge provider on 127.0.0.1 speaking the OpenAI and Anthropic protocols."""
    with FakeProvider(no_temperature_models=["fake-reasoner"]) as provider:
        yield provider


def app_queries(captured: Any) -> int:
    """The queries a request made, less those of the throttle's cache: on the embedded
    default (no Redis) that cache is a database table (`kindgi_cache`), on Redis it is none."""
    return sum(1 for query in captured.captured_queries if "kindgi_cache" not in query["sql"])


def guardrail_ci_files(
    tmp_path: Path, guardrail: dict[str, Any], judges: Any, traces: list[dict[str, Any]]
) -> list[str]:
    """Write a guardrail, judge models (JSON, or exported bytes) and JSONL traces: the CI arguments reading them."""
    (tmp_path / "g.json").write_text(json.dumps(guardrail))
    (tmp_path / "j.json").write_bytes(judges if isinstance(judges, bytes) else json.dumps(judges).encode())
    (tmp_path / "t.jsonl").write_text("".join(json.dumps(t) + "\n" for t in traces))
    return [
        "--guardrails",
        str(tmp_path / "g.json"),
        "--traces",
        str(tmp_path / "t.jsonl"),
        "--judge-models",
        str(tmp_path / "j.json"),
        "--format",
        "json",
    ]


def run_guardrail_ci_captured(argv: list[str]) -> tuple[int, str, str]:
    """`guardrail-ci` run in process: its exit status, stdout and stderr."""
    stdout, stderr = io.StringIO(), io.StringIO()
    status = run_guardrail_ci(argv, stdout, stderr)
    return status, stdout.getvalue(), stderr.getvalue()
