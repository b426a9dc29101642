"""POST /api/v1/traces: idempotent ingestion, limits, tenant checks."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from django.test import override_settings

from kindgi_console.tenancy.models import ApiKey, Tenant
from tests.conftest import make_trace, together
from traces.models import EvaluationResult, RunTrace, Violation

URL = "/api/v1/traces"


def post(client: Any, body: Any, **extra: Any) -> Any:
    data = body if isinstance(body, bytes) else orjson.dumps(body)
    return client.post(URL, data=data, content_type="application/json", **extra)


def batch(*ids: str) -> dict[str, Any]:
    return {"traces": [make_trace(trace_id) for trace_id in ids]}


def test_it_stores_a_trace_under_the_keys_tenant(api: Any, acme_key: str, acme: Tenant) -> None:
    response = post(api(acme_key), make_trace())
    assert response.status_code == 201
    assert response.json() == {"index": 0, "id": "run-0001", "status": "created", "errors": []}
    stored = RunTrace.objects.get()
    assert (stored.tenant, stored.trace_id, stored.agent, stored.flow) == (acme, "run-0001", "support-bot", "refund")
    assert stored.document["tenant"] == "acme"
    assert stored.started_at.isoformat() == "2026-11-29T10:00:00+00:00"
    assert len(stored.content_hash) == 64 and not stored.withheld


def test_the_same_trace_again_is_a_duplicate_and_stores_nothing(api: Any, acme_key: str) -> None:
    client = api(acme_key)
    post(client, make_trace())
    response = post(client, make_trace())
    assert response.status_code == 200
    assert response.json()["status"] == "duplicate"
    assert RunTrace.objects.count() == 1


def test_naming_the_keys_own_tenant_is_the_same_trace(api: Any, acme_key: str) -> None:
    client = api(acme_key)
    post(client, make_trace())
    assert post(client, make_trace(tenant="acme")).json()["status"] == "duplicate"


def test_the_same_id_with_other_content_is_a_conflict(api: Any, acme_key: str) -> None:
    client = api(acme_key)
    post(client, make_trace())
    response = post(client, make_trace(output="Something else."))
    assert response.status_code == 409
    body = response.json()
    assert body["status"] == "conflict"
    assert body["errors"][0]["path"] == "/id"
    assert RunTrace.objects.get().document["output"].startswith("Yes")


def test_an_invalid_trace_is_400_naming_the_field(api: Any, acme_key: str) -> None:
    response = post(api(acme_key), make_trace(toolcalls=[]))
    assert response.status_code == 400
    assert any(error["path"] == "/toolcalls" for error in response.json()["errors"])
    assert not RunTrace.objects.exists()


def test_a_batch_answers_207_with_each_items_status(api: Any, acme_key: str) -> None:
    client = api(acme_key)
    post(client, make_trace("old"))
    traces = [
        make_trace("new"),
        make_trace("old"),
        make_trace("old", output="changed"),
        {"id": "broken", "messages": "no"},
        make_trace("new"),
    ]
    response = post(client, {"traces": traces})
    assert response.status_code == 207
    results = response.json()["results"]
    assert [(r["index"], r["id"], r["status"]) for r in results] == [
        (0, "new", "created"),
        (1, "old", "duplicate"),
        (2, "old", "conflict"),
        (3, "broken", "invalid"),
        (4, "new", "duplicate"),
    ]
    assert results[3]["errors"][0]["path"] == "/messages"
    assert RunTrace.objects.count() == 2


def test_a_repeat_in_a_batch_is_compared_with_what_is_stored(api: Any, acme_key: str) -> None:
    """[changed, original] for a stored id: the changed one conflicts, the original is a duplicate."""
    client = api(acme_key)
    post(client, make_trace("old"))
    for traces in (
        [make_trace("old", output="changed"), make_trace("old")],
        [make_trace("old"), make_trace("old", output="changed")],
    ):
        statuses = [r["status"] for r in post(client, {"traces": traces}).json()["results"]]
        assert sorted(statuses) == ["conflict", "duplicate"]
        assert statuses[traces.index(make_trace("old"))] == "duplicate"
    assert RunTrace.objects.get().document["output"].startswith("Yes")


def test_the_same_batch_twice_stores_nothing_twice(api: Any, acme_key: str) -> None:
    client = api(acme_key)
    first = post(client, batch(*[f"run-{n}" for n in range(50)])).json()["results"]
    second = post(client, batch(*[f"run-{n}" for n in range(50)])).json()["results"]
    assert {item["status"] for item in first} == {"created"}
    assert {item["status"] for item in second} == {"duplicate"}
    assert RunTrace.objects.count() == 50


def test_a_batch_writes_with_a_fixed_number_of_queries(api: Any, acme_key: str) -> None:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from tests.conftest import app_queries

    client = api(acme_key)
    post(client, batch("warm-up"))  # the key's last-used time is written once a minute
    with CaptureQueriesContext(connection) as queries:
        post(client, batch(*[f"run-{n}" for n in range(200)]))
    # with the batch's row in the runtime evaluation outbox; SQLite adds the cache's savepoints
    assert app_queries(queries) <= (9 if connection.vendor == "postgresql" else 11)
    assert RunTrace.objects.count() == 201


@pytest.mark.postgresql("COPY straight into the table")
def test_a_new_batch_is_copied_straight_in_and_one_with_a_stored_id_through_the_load(api: Any, acme_key: str) -> None:
    """A batch of new traces is one COPY into the traces' table with keys from its sequence;
    a batch holding an id stored before is refused by the key, rolled back to its savepoint
    (nothing of it stays), and stored through the temporary table: each trace once, with
    the key its row has."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    client = api(acme_key)
    with CaptureQueriesContext(connection) as fresh:
        created = post(client, batch("a", "b", "c")).json()["results"]
    assert [item["status"] for item in created] == ["created"] * 3
    assert not [q for q in fresh.captured_queries if "kindgi_trace_load" in q["sql"]]
    with CaptureQueriesContext(connection) as mixed:
        second = post(client, batch("d", "b", "e")).json()["results"]
    assert [item["status"] for item in second] == ["created", "duplicate", "created"]
    assert [q for q in mixed.captured_queries if "ROLLBACK TO SAVEPOINT" in q["sql"]]
    assert [q for q in mixed.captured_queries if "kindgi_trace_load" in q["sql"]]
    stored = dict(RunTrace.objects.values_list("trace_id", "document__id"))
    assert stored == {name: name for name in "abcde"}


@override_settings(KINDGI_MAX_BATCH=3)
def test_a_batch_over_the_limit_is_400_and_stores_nothing(api: Any, acme_key: str) -> None:
    response = post(api(acme_key), batch("a", "b", "c", "d"))
    assert response.status_code == 400
    assert response.json()["errors"][0]["path"] == "/traces"
    assert not RunTrace.objects.exists()


@override_settings(DATA_UPLOAD_MAX_MEMORY_SIZE=2048, KINDGI_MAX_REQUEST_BYTES=2048)
def test_a_body_over_the_limit_is_413_and_stores_nothing(api: Any, acme_key: str) -> None:
    response = post(api(acme_key), batch("a", "b", "c", "d", "e"))
    assert response.status_code == 413
    assert "over the limit" in response.json()["errors"][0]["message"]
    assert not RunTrace.objects.exists()


@override_settings(KINDGI_MAX_TRACE_BYTES=1500)
def test_a_trace_over_the_limit_is_refused_alone(api: Any, acme_key: str) -> None:
    small = {"id": "small", "output": "ok"}
    response = post(api(acme_key), {"traces": [small, make_trace("big", input="x" * 2000)]})
    statuses = [item["status"] for item in response.json()["results"]]
    assert statuses == ["created", "invalid"]
    assert "over the limit of 1500" in response.json()["results"][1]["errors"][0]["message"]


def test_a_nul_character_is_refused_naming_the_field(api: Any, acme_key: str) -> None:
    trace = make_trace(messages=[{"role": "user", "content": "before\u0000after"}])
    response = post(api(acme_key), trace)
    assert response.status_code == 400
    assert response.json()["errors"][0]["path"] == "/messages/0/content"
    assert not RunTrace.objects.exists()


def test_nesting_deeper_than_the_limit_is_refused_naming_where(api: Any, acme_key: str) -> None:
    deep: Any = "bottom"
    for _ in range(70):
        deep = {"down": deep}
    response = post(api(acme_key), make_trace(metadata=deep))
    assert response.status_code == 400
    error = response.json()["errors"][0]
    assert error["path"].startswith("/metadata/down/down")
    assert "depth" in error["message"] or "nest" in error["message"]


def test_a_body_that_is_not_json_is_400(api: Any, acme_key: str) -> None:
    response = post(api(acme_key), b'{"id": ')
    assert response.status_code == 400
    assert response.json()["errors"][0]["path"] == ""


def test_a_body_that_is_not_declared_json_is_415(api: Any, acme_key: str) -> None:
    response = api(acme_key).post(URL, data="id=1", content_type="text/plain")
    assert response.status_code == 415
    assert "errors" in response.json()


def test_without_credentials_it_is_401(api: Any, db: Any) -> None:
    response = post(api(), make_trace())
    assert response.status_code == 401
    assert response.json()["errors"][0]["message"]


def test_a_revoked_key_is_401(api: Any, acme_key: str) -> None:
    ApiKey.objects.get().revoke()
    assert post(api(acme_key), make_trace()).status_code == 401


def test_a_key_without_the_ingest_scope_is_403(api: Any, acme: Tenant) -> None:
    reader = ApiKey.issue(scopes=["read"], tenant=acme)[1]
    assert post(api(reader), make_trace()).status_code == 403


def test_a_key_for_no_tenant_never_ingests(api: Any, db: Any) -> None:
    unbound = ApiKey.issue(scopes=["ingest", "author"])[1]
    response = post(api(unbound), make_trace())
    assert response.status_code == 403
    assert "no tenant" in response.json()["errors"][0]["message"]


def test_charlies_key_writing_acme_is_403_and_stores_nothing(api: Any, charlie_key: str, acme: Tenant) -> None:
    response = post(api(charlie_key), {"traces": [make_trace("x"), make_trace("y", tenant="acme")]})
    assert response.status_code == 403
    assert response.json()["errors"] == [
        {"path": "/tenant", "message": "this API key acts for tenant 'globex' only, not 'acme'"}
    ]
    assert not RunTrace.objects.exists()


def test_charlie_writing_acme_in_his_session_is_403(api: Any, charlie: Any, acme: Tenant) -> None:
    assert post(api(charlie), make_trace(tenant="acme")).status_code == 403
    assert not RunTrace.objects.exists()


def test_a_user_writes_to_a_tenant_they_author(api: Any, alice: Any) -> None:
    assert post(api(alice), make_trace(tenant="acme")).status_code == 201


def test_a_user_must_name_the_tenant(api: Any, alice: Any) -> None:
    response = post(api(alice), make_trace())
    assert response.status_code == 400
    assert response.json()["errors"][0]["path"] == "/tenant"


def test_a_reviewer_cannot_ingest(api: Any, bob: Any) -> None:
    assert post(api(bob), make_trace(tenant="acme")).status_code == 403


def test_the_session_needs_the_csrf_token(alice: Any) -> None:
    from rest_framework.test import APIClient

    client = APIClient(enforce_csrf_checks=True)
    client.force_login(alice)
    response = post(client, make_trace(tenant="acme"))
    assert response.status_code == 403
    assert "CSRF" in response.json()["errors"][0]["message"]


def test_the_same_trace_id_in_two_tenants_is_two_traces(api: Any, acme_key: str, charlie_key: str) -> None:
    assert post(api(acme_key), make_trace()).status_code == 201
    assert post(api(charlie_key), make_trace()).status_code == 201
    assert RunTrace.objects.count() == 2


@pytest.mark.django_db(transaction=True)
def test_every_stored_trace_is_evaluated_in_runtime_mode(api: Any, acme_key: str, halt_guardrail: Any) -> None:
    post(api(acme_key), batch("refunds", "another"))
    results = EvaluationResult.objects.order_by("trace__trace_id")
    assert [(r.trace.trace_id, r.status, r.mode, r.evaluation) for r in results] == [
        ("another", "fail", "runtime", None),
        ("refunds", "fail", "runtime", None),
    ]
    violation = Violation.objects.get(trace__trace_id="refunds")
    assert (violation.action, violation.severity, violation.agent) == ("halt", "critical", "support-bot")
    assert violation.revision.number == 1 and violation.state == "open"
    # As at POST evaluate: the halt guardrail failed, so the stored responses are withheld.
    assert set(RunTrace.objects.values_list("withheld", flat=True)) == {True}
    assert all("output" not in doc for doc in RunTrace.objects.values_list("document", flat=True))


@pytest.mark.django_db(transaction=True)
def test_concurrent_retries_store_nothing_twice(acme: Tenant) -> None:
    """Two requests with the same batch at once: each trace is stored once, and each
    request says created or duplicate, never conflict."""
    import threading
    import time

    from django.db import OperationalError, connection

    from kindgi_console.tenancy.scoping import Caller
    from traces.ingest import documents as ingest

    key = ApiKey.issue(scopes=["ingest"], tenant=acme)[0]
    documents = [make_trace(f"run-{n}") for n in range(200)]
    start = threading.Barrier(2)
    outcomes: list[list[str]] = []

    def send() -> None:
        try:
            start.wait()
            for _ in range(100):  # a runtime retries what failed; SQLite may say "locked"
                items = ingest.prepare_all(Caller(key=key), documents)
                try:
                    ingest.store(items)
                except OperationalError:
                    time.sleep(0.05)
                    continue
                outcomes.append([item.status for item in items])
                return
        finally:
            connection.close()

    together(send)
    assert RunTrace.objects.count() == 200
    assert len(outcomes) == 2
    for index in range(200):
        assert sorted(outcome[index] for outcome in outcomes) == ["created", "duplicate"]
