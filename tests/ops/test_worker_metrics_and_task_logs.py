"""A real Celery worker counts what it evaluates in the machine's metrics (its files sit
beside the web processes', and /metrics sums them all), and with KINDGI_LOG_FORMAT=json it
logs one JSON line per task: its id, name, state and duration, and the id and tenant of
the request that sent it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from django.test import Client

from kindgi_console.tenancy.models import ApiKey
from tests.conftest import make_guardrail, make_trace
from tests.ops.test_probes_and_metrics import scrape
from tests.traces.test_worker_recovery import real_broker  # noqa: F401 - a fixture
from tests.traces.workers import Worker, wait_for
from traces.models import EvaluationResult

pytestmark = [pytest.mark.services, pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("real_broker")]
FAILING = "kindgi_evaluations_total{guardrail=no-refunds,mode=runtime,status=fail}"


def test_a_worker_s_evaluations_are_in_the_scrape_and_its_tasks_in_the_log(
    tmp_path: Path, client: Client, api: Any, acme_key: str, author_key: str
) -> None:
    operator = ApiKey.issue(scopes=["metrics"], name="prometheus")[1]
    assert api(author_key).post("/api/v1/guardrails", make_guardrail(), format="json").status_code == 201
    before = scrape(client, operator).get(FAILING, 0)
    worker = Worker("counted", tmp_path, concurrency=1, roles=["runtime"], KINDGI_LOG_FORMAT="json")
    try:
        traces = {"traces": [make_trace(f"run-{index}") for index in range(5)]}
        sent = api(acme_key).post("/api/v1/traces", traces, format="json", HTTP_X_REQUEST_ID="ingest-1")
        assert sent.status_code in (200, 201, 207)
        wait_for(
            lambda: EvaluationResult.objects.filter(mode="runtime").count() == 5, 60, "the runtime results", worker
        )
        wait_for(lambda: '"logger": "kindgi.task"' in worker.output(), 30, "the task's log line", worker)
    finally:
        worker.stop()

    assert scrape(client, operator)[FAILING] - before == 5
    tasks = [json.loads(line) for line in worker.output().splitlines() if '"logger": "kindgi.task"' in line]
    [evaluated] = [line for line in tasks if line["task"] == "traces.tasks.evaluate_ingested"]
    assert evaluated["state"] == "SUCCESS"
    assert evaluated["task_id"]
    assert evaluated["duration_ms"] > 0
    assert (evaluated["request_id"], evaluated["tenant"]) == ("ingest-1", "acme")  # the request that sent it
