"""One violation per finding: a guardrail revision failing a trace again (another run, the
runtime, another stage) finds the violation stored, which keeps its review, and the roll-up
counts it once."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from django.db import connection, connections, transaction
from django.utils import timezone

from guardrails.services import enforced_guardrails
from kindgi_console.tenancy.scoping import Caller
from tests.conftest import make_trace
from tests.traces import seed
from traces.ingest import evaluate
from traces.models import Evaluation, Violation, ViolationDay
from traces.review import workflow as review
from traces.runs import chunks, evaluations

#: More traces than one statement's few rows (`bulk_postgres.FEW_ROWS`): runs copy them fresh.
TRACES = 70


def run_for(tenant: Any) -> Evaluation:
    run = evaluations.create_run(evaluations.RunRequest(tenant=tenant, label="test"))
    chunks.start_run(run.pk)
    run.refresh_from_db()
    return run


def rolled_up() -> int:
    return sum(ViolationDay.objects.values_list("count", flat=True))


def rolled_up_reviewed() -> int:
    return sum(ViolationDay.objects.values_list("reviewed", flat=True))


def test_two_runs_over_the_same_traces_leave_the_violations_as_they_were(
    api: Any, acme: Any, bob: Any, acme_key: str, halt_guardrail: Any
) -> None:
    stored = seed.traces(acme, TRACES)  # the runtime found each one
    found = seed.violations(acme)
    assert len(found) == TRACES == rolled_up()
    resolved = found[0]
    review.review(Violation.objects.filter(pk=resolved.pk), "resolved", "refund was allowed", Caller(user=bob))

    first, second = run_for(acme), run_for(acme)

    assert Violation.objects.count() == TRACES == rolled_up()
    assert rolled_up_reviewed() == 1
    resolved.refresh_from_db()
    assert (resolved.state, resolved.review_note, resolved.reviews.count()) == ("resolved", "refund was allowed", 1)
    assert resolved.evaluation_id is None and resolved.mode == "runtime"  # of the result that found it first
    for run in (first, second):
        assert run.summary["no-refunds"]["fail"] == TRACES
        results = api(acme_key).get(f"/api/v1/evaluations/{run.pk}/results?status=fail&limit=500").json()["results"]
        assert sorted(r["violation"] for r in results) == sorted(v.pk for v in found)
        assert {r["reviewState"] for r in results if r["violation"] == resolved.pk} == {"resolved"}
        listed = api(acme_key).get(f"/api/v1/violations?evaluation={run.pk}&limit=200").json()["results"]
        assert len(listed) == len(stored)


def test_a_run_then_the_runtime_finds_the_runs_violation(
    api: Any, acme: Any, acme_key: str, halt_guardrail: Any
) -> None:
    trace = make_trace("turn-1", tenant=acme.slug)
    seed.run_trace(acme, trace).save()
    run = run_for(acme)
    violation = Violation.objects.get()
    assert violation.evaluation_id == run.pk

    body = api(acme_key).post("/api/v1/evaluate", data=trace, format="json").json()

    assert body["turn"] == "failed" and body["trace"]["status"] == "duplicate"
    assert list(Violation.objects.values_list("pk", flat=True)) == [violation.pk]
    assert rolled_up() == 1


def test_a_new_revision_is_a_new_finding(acme: Any, halt_guardrail: Any) -> None:
    from guardrails.services import Author, save_guardrail
    from tests.conftest import make_guardrail

    seed.traces(acme, 2)
    document = make_guardrail()
    document["description"] = "a second revision"
    save_guardrail(document, Author(user=None, label="test"))
    run_for(acme)
    assert sorted(Violation.objects.values_list("revision__number", flat=True)) == [1, 1, 2, 2]
    assert rolled_up() == 4


@pytest.mark.django_db(transaction=True)
@pytest.mark.postgresql("a second writer waits on the first one's uncommitted violation")
def test_a_run_and_the_runtime_finding_the_same_at_once_make_one_violation(
    api: Any, acme: Any, acme_key: str, halt_guardrail: Any
) -> None:
    document = make_trace("turn-1", tenant=acme.slug)
    trace = seed.run_trace(acme, document)
    trace.save()
    run = Evaluation.objects.create(tenant=acme, status=Evaluation.Status.RUNNING, started_at=timezone.now())
    written, commit = threading.Event(), threading.Event()
    answers: list[Any] = []
    errors: list[BaseException] = []

    def the_run() -> None:
        try:
            with transaction.atomic():
                evaluate.evaluate_traces([trace], enforced_guardrails(acme), mode="ci", evaluation=run)
                written.set()
                commit.wait(timeout=60)
        except BaseException as error:
            errors.append(error)
        finally:
            written.set()
            connections.close_all()

    def the_runtime() -> None:
        try:
            answers.append(api(acme_key).post("/api/v1/evaluate", data=document, format="json"))
        except BaseException as error:
            errors.append(error)
        finally:
            connections.close_all()

    runner = threading.Thread(target=the_run)
    runner.start()
    written.wait(timeout=60)
    runtime = threading.Thread(target=the_runtime)
    runtime.start()
    waiting_on_the_run()
    commit.set()
    runner.join(timeout=60)
    runtime.join(timeout=60)

    assert not errors, errors
    assert answers[0].status_code == 200 and answers[0].json()["turn"] == "failed"
    violation = Violation.objects.get()
    assert violation.evaluation_id == run.pk  # the run stored it first; the runtime found it again
    assert rolled_up() == 1


def waiting_on_the_run() -> None:
    """Until another session waits on a lock (the runtime's insert, on the run's uncommitted
    violation): then the two are writing the same finding at once."""
    for _ in range(600):
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                "AND wait_event_type = 'Lock' AND pid <> pg_backend_pid()"
            )
            if cursor.fetchone()[0]:
                return
        threading.Event().wait(0.1)
    raise AssertionError("the runtime's write never waited on the run's")
