"""/healthz, /readyz, /healthz/workers and /metrics, in process: what each answers, who may
read the metrics, and what a verdict adds to them (parsed with prometheus-client's parser)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.db import connection, transaction
from django.test import Client, override_settings
from django.utils import timezone
from prometheus_client.parser import text_string_to_metric_families

from kindgi_console.tenancy.models import ApiKey, Tenant
from tests.conftest import make_guardrail, make_trace
from traces.models import WorkerHeartbeat

pytestmark = pytest.mark.django_db


def scrape(client: Client, key: str) -> dict[str, float]:
    """The scrape's samples as {name{labels}: value}, parsed by the library's own parser."""
    answer = client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {key}")
    assert answer.status_code == 200, answer.content
    assert answer["Content-Type"].startswith("text/plain")
    samples: dict[str, float] = {}
    for family in text_string_to_metric_families(answer.content.decode()):
        for sample in family.samples:
            labels = ",".join(f"{k}={v}" for k, v in sorted(sample.labels.items()))
            samples[f"{sample.name}{{{labels}}}"] = sample.value
    return samples


@pytest.fixture
def operator_key(db: Any) -> str:
    return ApiKey.issue(scopes=["metrics"], name="prometheus")[1]


def test_healthz_answers_without_the_database(client: Client, django_assert_num_queries: Any) -> None:
    with django_assert_num_queries(0):
        answer = client.get("/healthz")

    assert answer.status_code == 200
    assert answer.json() == {"status": "ok"}
    assert "no-store" in answer["Cache-Control"]


def test_readyz_checks_every_part(client: Client) -> None:
    answer = client.get("/readyz")

    assert answer.status_code == 200
    assert answer.json()["checks"] == {"database": "ok", "migrations": "ok", "broker": "ok", "cache": "ok"}


def test_readyz_is_a_503_naming_a_broker_that_does_not_answer(client: Client) -> None:
    with override_settings(CELERY_BROKER_URL="redis://127.0.0.1:1/0"):
        answer = client.get("/readyz")

    assert answer.status_code == 503
    body = answer.json()
    assert body["failed"] == ["broker"]
    assert body["checks"]["database"] == "ok"
    assert body["checks"]["broker"] == "ConnectionError"  # not the driver's message: it names hosts


def test_readyz_says_when_migrations_are_missing(client: Client, monkeypatch: pytest.MonkeyPatch) -> None:
    from django.db.migrations.executor import MigrationExecutor

    from kindgi_console import ops

    monkeypatch.setattr(ops, "_migrated", False)
    monkeypatch.setattr(MigrationExecutor, "migration_plan", lambda self, targets: [("traces.0099_next", False)])

    answer = client.get("/readyz")

    assert answer.status_code == 503
    assert answer.json()["checks"]["migrations"] == (
        "NotReady: 1 migrations not applied (first traces.0099_next): run manage.py migrate"
    )


def test_the_probes_are_answered_over_plain_http_to_any_host(client: Client) -> None:
    with override_settings(SECURE_SSL_REDIRECT=True, ALLOWED_HOSTS=["console.example.com"]):
        answer = client.get("/healthz", HTTP_HOST="10.0.0.7:8000")

    assert answer.status_code == 200


def test_a_probe_refuses_a_post(client: Client) -> None:
    answer = client.post("/readyz")

    assert answer.status_code == 405
    assert answer["Allow"] == "GET, HEAD"


def beating(hostname: str, seconds_ago: float) -> None:
    WorkerHeartbeat.objects.create(hostname=hostname, pid=1, seen_at=timezone.now() - timedelta(seconds=seconds_ago))


def test_workers_are_alive_when_every_worker_and_beat_beat_lately(client: Client) -> None:
    beating("runtime@host", 1)
    beating("beat@host", 2)

    answer = client.get("/healthz/workers")

    assert answer.status_code == 200, answer.json()
    assert [(p["hostname"], p["kind"], p["alive"]) for p in answer.json()["processes"]] == [
        ("beat@host", "beat", True),
        ("runtime@host", "worker", True),
    ]


@override_settings(KINDGI_WORKER_HEARTBEAT_SECONDS=10)
def test_a_worker_that_missed_three_beats_is_a_503_naming_it(client: Client) -> None:
    beating("runtime@host", 1)
    beating("runs@host", 31)
    beating("beat@host", 1)

    answer = client.get("/healthz/workers")
    one = client.get("/healthz/workers", {"hostname": "runtime@host"})

    assert answer.status_code == 503
    assert answer.json()["problems"] == ["runs@host missed three heartbeats"]
    assert one.status_code == 200  # a supervisor of that one worker leaves it running


def test_a_bad_hostname_is_a_400_naming_the_parameter(client: Client) -> None:
    for bad in ("run\x00s@host", "x" * 256):
        answer = client.get("/healthz/workers", {"hostname": bad})
        assert answer.status_code == 400
        assert answer.json()["errors"][0]["path"] == "/hostname"


def test_no_beat_is_a_503(client: Client) -> None:
    beating("runtime@host", 1)

    answer = client.get("/healthz/workers")

    assert answer.status_code == 503
    assert answer.json()["problems"] == ["no beat has a heartbeat"]


def test_the_workers_page_names_the_database_when_it_fails(client: Client) -> None:
    class Undo(Exception):
        pass

    with pytest.raises(Undo), transaction.atomic():  # the heartbeats' table gone, then back
        with connection.cursor() as cursor:
            cursor.execute("ALTER TABLE traces_workerheartbeat RENAME TO heartbeat_away")
        answer = client.get("/healthz/workers")
        raise Undo

    assert answer.status_code == 503
    assert answer.json()["problems"][0].startswith("database:")


def test_metrics_need_a_key(client: Client) -> None:
    answer = client.get("/metrics")

    assert answer.status_code == 401
    assert "metrics scope" in answer.json()["errors"][0]["message"]


def test_a_tenant_key_without_the_scope_gets_a_403(client: Client, charlie_key: str, acme_key: str) -> None:
    for key in (charlie_key, acme_key):
        answer = client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {key}")
        assert answer.status_code == 403
        assert b"kindgi_" not in answer.content


def test_a_tenant_key_given_the_metrics_scope_in_the_database_still_gets_a_403(client: Client, globex: Tenant) -> None:
    secret = ApiKey.issue(scopes=["metrics", "read"], tenant=globex)[1]  # never made by the pages or the command

    answer = client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {secret}")

    assert answer.status_code == 403


def test_a_console_wide_key_without_the_scope_gets_a_403(client: Client, author_key: str) -> None:
    assert client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {author_key}").status_code == 403


def test_a_revoked_key_gets_a_401(client: Client) -> None:
    key, secret = ApiKey.issue(scopes=["metrics"])
    key.revoke()

    assert client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {secret}").status_code == 401


def test_an_allowed_network_reads_the_metrics_without_a_key(client: Client) -> None:
    with override_settings(KINDGI_METRICS_ALLOWED_NETWORKS=["10.1.0.0/16"]):
        inside = client.get("/metrics", REMOTE_ADDR="10.1.2.3")
        outside = client.get("/metrics", REMOTE_ADDR="10.2.0.1")

    assert inside.status_code == 200
    assert outside.status_code == 401


def test_a_verdict_is_counted_by_stage_outcome_and_guardrail(
    client: Client, api: Any, acme_key: str, author_key: str, operator_key: str
) -> None:
    assert api(author_key).post("/api/v1/guardrails", make_guardrail(), format="json").status_code == 201
    before = scrape(client, operator_key)

    halted = api(acme_key).post("/api/v1/evaluate?store=false", make_trace("run-halt"), format="json")
    passed = api(acme_key).post("/api/v1/evaluate?store=false", make_trace("run-pass", toolCalls=[]), format="json")
    after = scrape(client, operator_key)

    assert halted.json()["turn"] == "failed" and passed.json()["turn"] != "failed"

    def grew(name: str) -> float:
        return after.get(name, 0) - before.get(name, 0)

    assert grew("kindgi_verdicts_total{outcome=halt,stage=output}") == 1
    assert grew("kindgi_verdicts_total{outcome=pass,stage=output}") == 1
    assert grew("kindgi_verdict_duration_seconds_count{stage=output}") == 2
    assert grew("kindgi_evaluations_total{guardrail=no-refunds,mode=runtime,status=fail}") == 1
    assert grew("kindgi_evaluations_total{guardrail=no-refunds,mode=runtime,status=pass}") == 1
    assert grew("kindgi_http_requests_total{method=POST,route=api-evaluate,status=2xx}") == 2
    assert grew("kindgi_http_request_duration_seconds_count{method=POST,route=api-evaluate}") == 2


def test_the_gauges_read_at_scrape_time(client: Client, operator_key: str) -> None:
    samples = scrape(client, operator_key)

    for queue in ("runtime", "runs", "periodic", "deliveries"):
        assert any(name.startswith("kindgi_queue_messages{") and f"-{queue}" in name for name in samples)
    assert samples["kindgi_outbox_batches{}"] == 0
    assert samples["kindgi_evaluation_runs{status=running}"] == 0
    assert samples["kindgi_uploads{status=failed}"] == 0
    assert samples["kindgi_oldest_lease_overdue_seconds{kind=chunk}"] == 0
    assert all(value == 0 for name, value in samples.items() if name.startswith("kindgi_scrape_errors"))
