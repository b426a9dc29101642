"""/metrics under the README's gunicorn command (three workers, gthread): a scrape sums the
requests every worker answered (prometheus-client's multi-process mode, `gunicorn.conf.py`),
and, with KINDGI_LOG_FORMAT=json, each request leaves one JSON line with its request id,
tenant, key prefix, status and duration."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from kindgi_console.tenancy.models import ApiKey, Tenant
from tests.conftest import make_trace
from tests.traces.workers import free_port, serving, wait_for
from tests.traces.workers import test_database_url as database_url_of_this_test

pytestmark = [pytest.mark.services, pytest.mark.django_db(transaction=True)]
ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
REQUESTS = 24


def healthy(base: str) -> bool:
    try:
        return httpx.get(f"{base}/healthz", timeout=5).status_code == 200
    except httpx.TransportError:
        return False


def requests_counted(text: str, route: str, method: str) -> float:
    families = {family.name: family for family in text_string_to_metric_families(text)}
    return sum(
        sample.value
        for sample in families["kindgi_http_requests"].samples
        if sample.name == "kindgi_http_requests_total"
        and sample.labels["route"] == route
        and sample.labels["method"] == method
    )


def test_a_scrape_sums_the_requests_of_every_gunicorn_worker(tmp_path: Path) -> None:
    acme = Tenant.objects.create(slug="acme")
    runtime_key, runtime = ApiKey.issue(scopes=["ingest", "evaluate", "read"], tenant=acme, name="runtime")
    operator = ApiKey.issue(scopes=["metrics"], name="prometheus")[1]
    port = free_port()
    var = tmp_path / "var"
    env = {
        **{k: v for k, v in os.environ.items() if k != "DJANGO_ALLOW_ASYNC_UNSAFE"},
        "DATABASE_URL": database_url_of_this_test(),
        "KINDGI_VAR_DIR": str(var),
        "KINDGI_LOG_FORMAT": "json",
        "DJANGO_SETTINGS_MODULE": "kindgi_console.settings",
    }
    log = tmp_path / "gunicorn.log"
    command = [str(BIN / "gunicorn"), "kindgi_console.wsgi:application", "--bind", f"127.0.0.1:{port}"]
    command += ["--workers", "3", "--worker-class", "gthread", "--threads", "1", "--worker-tmp-dir", "/dev/shm"]
    process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=log.open("wb"))
    base = f"http://127.0.0.1:{port}"
    with serving(process, port, 60, "gunicorn"):
        # The socket listens before the workers have loaded the application (slow on a busy machine)
        wait_for(lambda: healthy(base), 120, "gunicorn's workers to answer")
        for index in range(REQUESTS):  # a connection each: gunicorn's workers share them out
            answer = httpx.post(
                f"{base}/api/v1/evaluate?store=false",
                json=make_trace(f"run-{index}"),
                headers={"Authorization": f"Bearer {runtime}", "X-Request-ID": f"test-{index}", "Connection": "close"},
                timeout=30,
            )
            assert answer.status_code == 200, answer.text
            assert answer.headers["X-Request-ID"] == f"test-{index}"
        scraped = httpx.get(f"{base}/metrics", headers={"Authorization": f"Bearer {operator}"}, timeout=30)

    assert scraped.status_code == 200, scraped.text
    assert requests_counted(scraped.text, "api-evaluate", "POST") == REQUESTS
    workers_counting = {path.name for path in (var / "metrics").glob("*/counter_*.db")}
    assert len(workers_counting) >= 2, workers_counting  # the sum is over several processes' files

    lines = [json.loads(line) for line in log.read_text().splitlines() if line.startswith("{")]
    requests = {line["request_id"]: line for line in lines if line["logger"] == "kindgi.access"}
    assert set(requests) >= {f"test-{index}" for index in range(REQUESTS)}
    first = requests["test-0"]
    assert first["route"] == "api-evaluate"
    assert first["status"] == 200
    assert first["tenant"] == "acme"
    assert first["key_prefix"] == runtime_key.prefix
    assert first["duration_ms"] > 0
    assert not [line for line in lines if line.get("route") == "metrics" and line["level"] == "INFO"]
