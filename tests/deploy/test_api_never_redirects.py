"""With production settings (DJANGO_DEBUG=false), plain HTTP to /api/ is refused in the API's
error shape, never redirected: gunicorn on a real socket, called by httpx and by the
OpenTelemetry SDK's OTLP exporter, which once counted the 301 as delivered."""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tests.traces.workers import free_port, serving, wait_for

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent


@pytest.fixture(scope="module")
def production_console(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """gunicorn serving the console with production settings on the embedded database."""
    folder = tmp_path_factory.mktemp("production")
    port = free_port()
    env = {
        **{k: v for k, v in os.environ.items() if k not in ("DJANGO_ALLOW_ASYNC_UNSAFE", "CELERY_BROKER_URL")},
        "DJANGO_DEBUG": "false",
        "DJANGO_SECRET_KEY": secrets.token_urlsafe(64),
        "DJANGO_ALLOWED_HOSTS": "127.0.0.1",
        "DJANGO_SETTINGS_MODULE": "kindgi_console.settings",
        "DATABASE_URL": f"sqlite:///{folder / 'db.sqlite3'}",
    }
    process = subprocess.Popen(
        [str(BIN / "gunicorn"), "kindgi_console.wsgi:application", "--bind", f"127.0.0.1:{port}", "--workers", "1"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=(folder / "gunicorn.log").open("wb"),
    )
    with serving(process, port, 60, "gunicorn with production settings"):
        # The socket listens before the worker has loaded the application (seconds on a busy machine)
        wait_for(lambda: answers_http(f"http://127.0.0.1:{port}"), 120, "gunicorn's worker to answer")
        yield f"http://127.0.0.1:{port}"


def answers_http(base: str) -> bool:
    try:
        return httpx.get(f"{base}/healthz", timeout=5).status_code == 200
    except httpx.TransportError:
        return False


def test_plain_http_to_the_api_is_a_json_403_saying_why(production_console: str) -> None:
    answer = httpx.post(f"{production_console}/api/v1/evaluate", json={}, follow_redirects=False)

    assert answer.status_code == 403
    assert "location" not in answer.headers
    [error] = answer.json()["errors"]
    assert error["path"] == ""
    assert error["message"].startswith("HTTPS is required")
    assert "X-Forwarded-Proto" in error["message"]


def test_pages_still_redirect_to_https(production_console: str) -> None:
    answer = httpx.get(f"{production_console}/login/", follow_redirects=False)

    assert answer.status_code == 301
    assert answer.headers["location"].startswith("https://")


def test_the_api_behind_a_proxy_that_says_https_is_served(production_console: str) -> None:
    answer = httpx.get(
        f"{production_console}/api/v1/traces", headers={"X-Forwarded-Proto": "https"}, follow_redirects=False
    )

    assert answer.status_code == 401  # reached the API: no key given


def one_span() -> list[ReadableSpan]:
    captured = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(captured))
    with provider.get_tracer("kindgi-test").start_as_current_span("invoke_agent"):
        pass
    return list(captured.get_finished_spans())


def test_an_otlp_exporter_pointed_at_plain_http_counts_a_failure(production_console: str) -> None:
    exporter = OTLPSpanExporter(
        endpoint=f"{production_console}/api/v1/otlp/v1/traces", headers={"authorization": "Bearer kgi_none"}
    )
    try:
        assert exporter.export(one_span()) is SpanExportResult.FAILURE
    finally:
        exporter.shutdown()
