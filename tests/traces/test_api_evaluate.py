"""POST /api/v1/evaluate: the runtime verdict, stored with its results."""

from __future__ import annotations

from typing import Any

import pytest

from guardrails.services import Author, save_guardrail
from tests.conftest import make_guardrail, make_trace
from traces.models import EvaluationResult, RunTrace, Violation, ViolationDay

URL = "/api/v1/evaluate"


def evaluate(client: Any, trace: Any, query: str = "") -> Any:
    return client.post(URL + query, data=trace, format="json")


@pytest.fixture
def log_only(db: Any) -> Any:
    document = make_guardrail(
        "cite-sources", check="must-cite", config={"min": 2}, action={"on-violation": "log-only"}, severity="warn"
    )
    return save_guardrail(document, Author(user=None, label="fixture"))


def test_a_halt_failure_fails_the_turn_and_withholds_the_response(api: Any, acme_key: str, halt_guardrail: Any) -> None:
    response = evaluate(api(acme_key), make_trace())
    assert response.status_code == 200
    body = response.json()
    assert (body["turn"], body["reason"]) == ("failed", "guardrail-violation")
    assert [(r["guardrail"], r["status"], r["revision"]) for r in body["results"]] == [("no-refunds", "fail", 1)]
    assert body["trace"]["status"] == "created"
    stored = RunTrace.objects.get()
    assert stored.withheld and "output" not in stored.document
    assert stored.document["input"] == make_trace()["input"]
    assert Violation.objects.get().action == "halt"


def test_other_actions_complete_the_turn_and_record_the_violation(api: Any, acme_key: str, log_only: Any) -> None:
    body = evaluate(api(acme_key), make_trace()).json()
    assert (body["turn"], body["reason"]) == ("completed", None)
    stored = RunTrace.objects.get()
    assert not stored.withheld and stored.document["output"]
    violation = Violation.objects.get()
    assert (violation.action, violation.severity, violation.mode) == ("log-only", "warn", "runtime")


def test_a_passing_trace_completes(api: Any, acme_key: str, halt_guardrail: Any) -> None:
    body = evaluate(api(acme_key), make_trace(toolCalls=[])).json()
    assert body["turn"] == "completed"
    assert EvaluationResult.objects.get().status == "pass"
    assert not Violation.objects.exists()


def test_evaluating_again_stores_nothing_twice(api: Any, acme_key: str, halt_guardrail: Any) -> None:
    client = api(acme_key)
    evaluate(client, make_trace())
    body = evaluate(client, make_trace()).json()
    assert body["trace"]["status"] == "duplicate"
    assert (RunTrace.objects.count(), EvaluationResult.objects.count(), Violation.objects.count()) == (1, 1, 1)


def test_store_false_stores_nothing(api: Any, acme_key: str, halt_guardrail: Any) -> None:
    body = evaluate(api(acme_key), make_trace(), "?store=false").json()
    assert body["turn"] == "failed"
    assert "trace" not in body
    assert not RunTrace.objects.exists() and not EvaluationResult.objects.exists()


def test_a_disabled_guardrail_is_not_enforced(api: Any, acme_key: str, halt_guardrail: Any) -> None:
    halt_guardrail.enabled = False
    halt_guardrail.save()
    body = evaluate(api(acme_key), make_trace(), "?store=false").json()
    assert (body["turn"], body["results"]) == ("completed", [])


def test_an_invalid_trace_is_400_with_pointers(api: Any, acme_key: str) -> None:
    response = evaluate(api(acme_key), {"id": "x", "toolCalls": [{"arguments": {}}]})
    assert response.status_code == 400
    assert response.json()["errors"][0]["path"] == "/toolCalls/0/name"


def test_a_key_without_the_evaluate_scope_is_403(api: Any, acme: Any) -> None:
    from kindgi_console.tenancy.models import ApiKey

    ingest_only = ApiKey.issue(scopes=["ingest"], tenant=acme)[1]
    assert evaluate(api(ingest_only), make_trace()).status_code == 403


def test_charlies_key_cannot_evaluate_for_acme(api: Any, charlie_key: str, acme: Any, halt_guardrail: Any) -> None:
    assert evaluate(api(charlie_key), make_trace(tenant="acme")).status_code == 403
    assert evaluate(api(charlie_key), make_trace(tenant="acme"), "?store=false").status_code == 403
    assert not RunTrace.objects.exists()


def test_charlie_cannot_evaluate_for_acme_in_his_session(api: Any, charlie: Any, acme: Any) -> None:
    assert evaluate(api(charlie), make_trace(tenant="acme")).status_code == 403


def test_a_guardrail_scoped_to_another_tenant_is_skipped(api: Any, acme_key: str) -> None:
    document = make_guardrail(scope={"tenants": ["globex"]})
    save_guardrail(document, Author(user=None, label="fixture"))
    body = evaluate(api(acme_key), make_trace()).json()
    assert body["turn"] == "completed"
    assert not EvaluationResult.objects.exists()


def queries_of_one_evaluation(client: Any, trace_id: str) -> int:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as captured:
        assert evaluate(client, make_trace(id=trace_id)).status_code == 200
    # Left out: savepoints (SQLite's transaction) and the throttle's database cache (SQLite
    # has no Redis); PostgreSQL's cache is Redis and it has neither.
    return len(
        [
            query
            for query in captured.captured_queries
            if not query["sql"].startswith(("SAVEPOINT", "RELEASE")) and "kindgi_cache" not in query["sql"]
        ]
    )


def test_an_evaluation_makes_a_few_queries_whatever_the_number_of_guardrails(
    api: Any, acme_key: str, halt_guardrail: Any
) -> None:
    """On PostgreSQL two: the key with the enforced guardrails' stamp, then the trace, its
    results, violations and the day's roll-up in one statement (no BEGIN, no COMMIT).
    Elsewhere a few more, in one transaction."""
    client = api(acme_key)
    evaluate(client, make_trace(id="warm-1"))  # the key's last use, the guardrails read
    one = queries_of_one_evaluation(client, "one")
    for n in range(6):
        save_guardrail(make_guardrail(f"no-refunds-{n}"), Author(user=None, label="fixture"))
    evaluate(client, make_trace(id="warm-7"))  # the changed guardrails are read again
    seven = queries_of_one_evaluation(client, "seven")
    from django.db import connection

    assert one == seven
    if connection.vendor == "postgresql":
        assert seven == 2
    else:
        assert seven <= SQLITE_QUERIES
    assert EvaluationResult.objects.filter(trace__trace_id="seven").count() == 7
    assert Violation.objects.filter(trace__trace_id="seven").count() == 7
    # warm-1 and one failed one guardrail each, warm-7 and seven all seven: every fail counted
    assert sum(ViolationDay.objects.values_list("count", flat=True)) == 1 + 1 + 7 + 7
    from traces.store import violation_days

    kept = sorted(ViolationDay.objects.values_list(*ROLL_UP))
    violation_days.rebuild()  # counted again from the violations: the same rows
    assert sorted(ViolationDay.objects.values_list(*ROLL_UP)) == kept


ROLL_UP = ("tenant_id", "guardrail_id", "revision_id", "severity", "day", "count", "reviewed", "false_positives")


#: SQLite: the key, the stamp, the trace (one INSERT), the results and their violations
#: (two), the roll-up, in one transaction.
SQLITE_QUERIES = 7


def test_a_trace_stored_before_its_guardrail_gets_the_results_of_its_repeat(api: Any, acme_key: str) -> None:
    """A repeated trace (same id, same body) is a duplicate whose verdict is stored too."""
    client = api(acme_key)
    assert evaluate(client, make_trace()).json()["trace"]["status"] == "created"
    assert not EvaluationResult.objects.exists()
    save_guardrail(make_guardrail(), Author(user=None, label="fixture"))
    body = evaluate(client, make_trace()).json()
    assert (body["turn"], body["trace"]["status"]) == ("failed", "duplicate")
    trace = RunTrace.objects.get()
    assert EvaluationResult.objects.get().trace == trace
    assert Violation.objects.get().trace == trace
    assert list(ViolationDay.objects.values_list("count", flat=True)) == [1]


def test_another_trace_with_a_stored_id_is_a_conflict_and_stores_no_results(
    api: Any, acme_key: str, halt_guardrail: Any
) -> None:
    client = api(acme_key)
    evaluate(client, make_trace(toolCalls=[]))  # passes: one result
    body = evaluate(client, make_trace()).json()  # another body, the same id: it fails
    assert body["turn"] == "failed"
    assert body["trace"]["status"] == "conflict"
    assert body["trace"]["errors"][0]["path"] == "/id"
    assert list(EvaluationResult.objects.values_list("status", flat=True)) == ["pass"]
    assert not Violation.objects.exists() and not ViolationDay.objects.exists()


def test_an_edited_guardrail_is_enforced_at_its_new_revision(api: Any, acme_key: str, halt_guardrail: Any) -> None:
    client = api(acme_key)
    assert evaluate(client, make_trace(id="before")).json()["turn"] == "failed"
    edited = make_guardrail(config={"tools": ["delete_account"]}, action={"on-violation": "log-only"})
    save_guardrail(edited, Author(user=None, label="fixture"))
    body = evaluate(client, make_trace(id="after")).json()
    assert body["turn"] == "completed"
    assert [(r["guardrail"], r["status"], r["revision"]) for r in body["results"]] == [("no-refunds", "pass", 2)]


def test_a_revoked_key_is_refused_at_its_next_request(api: Any, acme_key: str, halt_guardrail: Any) -> None:
    from kindgi_console.tenancy.models import ApiKey, hash_key

    client = api(acme_key)
    assert evaluate(client, make_trace(id="while-valid")).status_code == 200
    ApiKey.objects.get(hash=hash_key(acme_key)).revoke()
    assert evaluate(client, make_trace(id="after-revoked")).status_code == 401


@pytest.mark.postgresql("prepared statements are PostgreSQL's")
@pytest.mark.parametrize("prepared", [True, False])
def test_the_verdicts_write_is_prepared_on_postgresql_unless_switched_off(
    api: Any, acme_key: str, halt_guardrail: Any, prepared: bool
) -> None:
    from django.conf import settings
    from django.db import connection

    assert settings.DATABASES["default"]["OPTIONS"]["prepare_threshold"] == 5  # DATABASE_PREPARED_STATEMENTS
    client = api(acme_key)
    connection.ensure_connection()
    threshold = connection.connection.prepare_threshold
    connection.connection.prepare_threshold = threshold if prepared else None  # as when switched off
    try:
        for n in range(3):
            assert evaluate(client, make_trace(id=f"turn-{n}")).json()["trace"]["status"] == "created"
        with connection.cursor() as cursor:
            cursor.execute("SELECT count(*) FROM pg_prepared_statements WHERE statement LIKE %s", ["%WITH trace AS%"])
            assert cursor.fetchone()[0] == (1 if prepared else 0)
    finally:
        connection.connection.prepare_threshold = threshold
    assert Violation.objects.count() == 3
