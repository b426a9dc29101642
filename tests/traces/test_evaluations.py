"""Evaluation runs with tasks run eagerly: chunking, idempotency, cancel, summary, the API."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from guardrails.services import Author, save_guardrail
from tests.conftest import app_queries, make_guardrail, make_trace
from tests.traces.seed import run_trace
from traces.models import Evaluation, EvaluationChunk, EvaluationResult, RunTrace, Violation
from traces.runs import chunks, evaluations, run_ends
from traces.store import leases

URL = "/api/v1/evaluations"


def store_traces(tenant: Any, count: int, **fields: Any) -> list[RunTrace]:
    """`count` traces of `tenant`; every third one calls issue_refund."""
    rows = []
    for n in range(count):
        document = make_trace(f"run-{n:05d}", tenant=tenant.slug, **fields)
        if n % 3:
            document["toolCalls"] = document["toolCalls"][:1]
        rows.append(run_trace(tenant, document))
    return RunTrace.objects.bulk_create(rows)


def run_for(tenant: Any, **fields: Any) -> Evaluation:
    request = evaluations.RunRequest(tenant=tenant, label="test", **fields)
    run = evaluations.create_run(request)
    chunks.start_run(run.pk)
    run.refresh_from_db()
    return run


def test_a_run_is_split_in_chunks_by_ranges_of_trace_keys(acme: Any, guardrails: Any, settings: Any) -> None:
    settings.KINDGI_EVALUATION_CHUNK_SIZE = 4
    settings.KINDGI_EVALUATION_BATCH = 3
    traces = store_traces(acme, 10)
    run = run_for(acme)
    chunks = list(run.chunks.order_by("number"))
    assert [(c.first_pk, c.last_pk, c.size) for c in chunks] == [
        (traces[0].pk, traces[3].pk, 4),
        (traces[4].pk, traces[7].pk, 4),
        (traces[8].pk, traces[9].pk, 2),
    ]
    assert all(c.status == "done" for c in chunks)
    assert (run.status, run.done, run.total) == ("succeeded", 10, 10)
    assert run.started_at and run.finished_at and run.finished_at >= run.started_at


def test_it_stores_one_result_per_trace_and_selecting_guardrail(acme: Any, guardrails: Any) -> None:
    store_traces(acme, 9)
    run = run_for(acme)
    assert EvaluationResult.objects.filter(evaluation=run).exclude(status="skipped").count() == 9 * 2
    skipped = EvaluationResult.objects.filter(evaluation=run, status="skipped")
    assert {(r.guardrail.guardrail_id, r.skip_reason) for r in skipped} == {("billing-only", "flows")}
    assert skipped.count() == 9  # billing-only skips each, and says why
    assert run.summary == {
        "billing-only": {"pass": 0, "fail": 0, "error": 0, "skipped": 9},
        "cite": {"pass": 9, "fail": 0, "error": 0, "skipped": 0},
        "no-refunds": {"pass": 6, "fail": 3, "error": 0, "skipped": 0},
    }
    violations = Violation.objects.filter(evaluation=run)
    assert violations.count() == 3
    assert {(v.mode, v.action, v.severity) for v in violations} == {("ci", "halt", "critical")}


def test_running_a_chunk_twice_stores_nothing_twice(acme: Any, guardrails: Any) -> None:
    store_traces(acme, 6)
    run = run_for(acme)
    chunk = run.chunks.get()
    # The worker stored the results, then died before marking the chunk done.
    Evaluation.objects.filter(pk=run.pk).update(status="running", done=0, finished_at=None)
    EvaluationChunk.objects.filter(pk=chunk.pk).update(status="running", progress=0, lease_until=timezone.now())
    assert chunks.evaluate_chunk(chunk.pk) is True  # lease expired: taken again
    assert chunks.evaluate_chunk(chunk.pk) is False  # done: nothing to do
    run.refresh_from_db()
    assert (run.status, run.done) == ("succeeded", 6)
    assert EvaluationResult.objects.filter(evaluation=run).exclude(status="skipped").count() == 12
    assert Violation.objects.filter(evaluation=run).count() == 2


def progress_seen(monkeypatch: Any, run: Evaluation) -> list[int]:
    """The run's `done` as read after each stored batch (what the runs page shows then)."""
    seen: list[int] = []
    count = chunks.count_progress

    def counting(*args: Any, **kwargs: Any) -> bool:
        counted = count(*args, **kwargs)
        seen.append(Evaluation.objects.get(pk=run.pk).done)
        return counted

    monkeypatch.setattr(evaluations, "count_progress", counting)
    return seen


def test_a_run_advances_with_each_batch_of_a_chunk(acme: Any, guardrails: Any, settings: Any, monkeypatch: Any) -> None:
    settings.KINDGI_EVALUATION_CHUNK_SIZE = 10
    settings.KINDGI_EVALUATION_BATCH = 3
    store_traces(acme, 10)
    run = evaluations.create_run(evaluations.RunRequest(tenant=acme))
    Evaluation.objects.filter(pk=run.pk).update(status="running", total=10)
    EvaluationChunk.objects.bulk_create(chunks.plan_chunks(run))
    seen = progress_seen(monkeypatch, run)
    assert chunks.evaluate_chunk(run.chunks.get().pk)
    # Four batches (3, 3, 3, 1) each advance the run; the last one as the chunk is marked
    # done (one update for both).
    assert seen == [3, 6, 9, 10]
    run.refresh_from_db()
    assert (run.status, run.done, run.chunks.get().progress) == ("succeeded", 10, 10)


def test_a_chunk_redone_after_a_lost_worker_counts_each_trace_once(
    acme: Any, guardrails: Any, settings: Any, monkeypatch: Any
) -> None:
    settings.KINDGI_EVALUATION_CHUNK_SIZE = 10
    settings.KINDGI_EVALUATION_BATCH = 4
    store_traces(acme, 10)
    run = evaluations.create_run(evaluations.RunRequest(tenant=acme))
    Evaluation.objects.filter(pk=run.pk).update(status="running", total=10)
    EvaluationChunk.objects.bulk_create(chunks.plan_chunks(run))
    chunk = run.chunks.get()
    stored = chunks.evaluate_batch

    def lost_after_two_batches(*args: Any, **kwargs: Any) -> int | None:
        if EvaluationResult.objects.filter(evaluation=run).exclude(status="skipped").count() >= 8 * 2:
            raise SystemExit("worker lost")
        return stored(*args, **kwargs)

    monkeypatch.setattr(evaluations, "evaluate_batch", lost_after_two_batches)
    with pytest.raises(SystemExit):
        chunks.evaluate_chunk(chunk.pk)
    run.refresh_from_db()
    assert run.done == 8  # two batches counted before the worker was lost
    monkeypatch.setattr(evaluations, "evaluate_batch", stored)
    EvaluationChunk.objects.filter(pk=chunk.pk).update(lease_until=timezone.now() - leases.lease())
    seen = progress_seen(monkeypatch, run)
    assert chunks.evaluate_chunk(chunk.pk)  # taken again: its first two batches add nothing
    assert seen == [8, 8, 10]  # the last batch counted as the chunk is marked done
    run.refresh_from_db()
    assert (run.status, run.done) == ("succeeded", 10)
    assert EvaluationResult.objects.filter(evaluation=run).exclude(status="skipped").count() == 20


def test_a_chunk_held_by_a_live_lease_is_left_alone(acme: Any, guardrails: Any) -> None:
    store_traces(acme, 3)
    run = evaluations.create_run(evaluations.RunRequest(tenant=acme))
    run.status = "running"
    run.save()
    chunk = EvaluationChunk.objects.create(
        evaluation=run,
        number=0,
        first_pk=0,
        last_pk=10**9,
        size=3,
        status="running",
        lease_until=timezone.now() + leases.lease(),
    )
    assert chunks.evaluate_chunk(chunk.pk) is False
    assert not EvaluationResult.objects.exists()


def test_expired_chunks_are_sent_again_and_the_run_completes(acme: Any, guardrails: Any, settings: Any) -> None:
    settings.KINDGI_EVALUATION_CHUNK_SIZE = 2
    store_traces(acme, 6)
    run = evaluations.create_run(evaluations.RunRequest(tenant=acme))
    Evaluation.objects.filter(pk=run.pk).update(status="running", total=6)
    for number, chunk in enumerate(chunks.plan_chunks(run)):
        chunk.status = "running" if number else "queued"
        chunk.lease_until = timezone.now() - leases.lease()
        chunk.save()
    assert chunks.requeue_expired_work() == 3
    run.refresh_from_db()
    assert (run.status, run.done) == ("succeeded", 6)
    assert EvaluationResult.objects.filter(evaluation=run).exclude(status="skipped").count() == 12


def test_a_run_never_planned_is_started_by_the_check(acme: Any, guardrails: Any) -> None:
    store_traces(acme, 2)
    run = evaluations.create_run(evaluations.RunRequest(tenant=acme))
    Evaluation.objects.filter(pk=run.pk).update(created_at=timezone.now() - 2 * leases.lease())
    chunks.requeue_expired_work()
    run.refresh_from_db()
    assert run.status == "succeeded"


def test_cancel_stops_the_chunks_not_yet_done(acme: Any, guardrails: Any, settings: Any) -> None:
    settings.KINDGI_EVALUATION_CHUNK_SIZE = 2
    store_traces(acme, 6)
    run = evaluations.create_run(evaluations.RunRequest(tenant=acme))
    Evaluation.objects.filter(pk=run.pk).update(status="running", total=6)
    EvaluationChunk.objects.bulk_create(chunks.plan_chunks(run))
    first = run.chunks.order_by("number").first()
    assert chunks.evaluate_chunk(first.pk)
    assert run_ends.cancel_run(run)
    for chunk in run.chunks.all():
        chunks.evaluate_chunk(chunk.pk)
    run.refresh_from_db()
    assert (run.status, run.done) == ("cancelled", 2)
    assert sorted(run.chunks.values_list("status", flat=True)) == ["cancelled", "cancelled", "done"]
    assert EvaluationResult.objects.filter(evaluation=run).exclude(status="skipped").count() == 4
    assert run.summary["no-refunds"] == {"pass": 1, "fail": 1, "error": 0, "skipped": 0}
    assert not run_ends.cancel_run(run)


def test_revisions_are_pinned_when_the_run_is_created(acme: Any, guardrails: Any) -> None:
    store_traces(acme, 3)
    run = evaluations.create_run(evaluations.RunRequest(tenant=acme, guardrails=["no-refunds"]))
    save_guardrail(make_guardrail(config={"tools": ["lookup_order"]}), Author(user=None, label="x"))
    chunks.start_run(run.pk)
    revisions = set(EvaluationResult.objects.filter(evaluation=run).values_list("revision__number", flat=True))
    assert revisions == {1}


def test_filters_select_the_traces(acme: Any, globex: Any, guardrails: Any) -> None:
    store_traces(acme, 4, agent="sales-bot")
    RunTrace.objects.filter(trace_id__in=["run-00000", "run-00001"]).update(agent="support-bot")
    store_traces(globex, 5)
    run = run_for(acme, filters={"agent": "support-bot"}, guardrails=["no-refunds"])
    assert run.total == 2
    assert set(EvaluationResult.objects.filter(evaluation=run).values_list("tenant__slug", flat=True)) == {"acme"}
    early = run_for(acme, filters={"until": "2000-01-01T00:00:00Z"})
    assert (early.status, early.total) == ("succeeded", 0)


def test_a_runtime_mode_run_records_runtime_results(acme: Any, guardrails: Any) -> None:
    store_traces(acme, 3)
    run = run_for(acme, mode="runtime")
    assert run.status == "succeeded" and run.mode == "runtime"
    assert set(EvaluationResult.objects.filter(evaluation=run).values_list("mode", flat=True)) == {"runtime"}


# ---------------------------------------------------------------------------- the API


def test_it_starts_a_run_and_answers_202_with_its_id(
    api: Any, alice: Any, guardrails: Any, django_capture_on_commit_callbacks: Any
) -> None:
    store_traces(alice.memberships.get().tenant, 5)
    with django_capture_on_commit_callbacks(execute=True):
        response = api(alice).post(URL, {"tenant": "acme", "guardrails": ["no-refunds", "cite"]}, format="json")
    assert response.status_code == 202, response.json()
    body = response.json()
    run = api(alice).get(f"{URL}/{body['id']}").json()
    assert run["status"] == "succeeded"
    assert run["progress"] == {"done": 5, "total": 5, "percent": 100}
    assert run["guardrails"] == [{"id": "cite", "revision": 1}, {"id": "no-refunds", "revision": 1}]
    assert run["summary"]["no-refunds"] == {"pass": 3, "fail": 2, "error": 0, "skipped": 0}
    assert run["startedBy"] == "alice"


@pytest.mark.parametrize(
    ("body", "path"),
    [
        ({"tenant": "acme", "guardrails": ["nope"]}, "/guardrails/0"),
        ({"tenant": "acme", "guardrails": "no-refunds"}, "/guardrails"),
        ({"tenant": "acme", "mode": "later"}, "/mode"),
        ({"tenant": "acme", "filters": {"since": "yesterday"}}, "/filters/since"),
        ({"tenant": "acme", "filters": {"since": "9999-12-31T23:59:59-23:59"}}, "/filters/since"),
        ({"tenant": "acme", "filters": {"until": "0001-01-01T00:00:00+23:59"}}, "/filters/until"),
        ({"tenant": "acme", "filters": {"colour": "red"}}, "/filters/colour"),
        ({"tenant": "acme", "filters": {"upload": 999}}, "/filters/upload"),
        ({"tenant": "acme", "colour": "red"}, "/colour"),
        ({"guardrails": []}, "/tenant"),
        ({"tenant": "acme", "guardrails": ["cite", "no-\u0000refunds"]}, "/guardrails/1"),
    ],
)
def test_a_bad_request_names_the_field(api: Any, alice: Any, guardrails: Any, body: Any, path: str) -> None:
    response = api(alice).post(URL, body, format="json")
    assert response.status_code == 400
    assert response.json()["errors"][0]["path"] == path


def test_a_key_starts_runs_for_its_tenant(api: Any, acme_key: str, guardrails: Any, acme: Any) -> None:
    store_traces(acme, 2)
    response = api(acme_key).post(URL, {}, format="json")
    assert response.status_code == 202
    assert response.json()["tenant"] == "acme"


def test_a_reviewer_reads_starts_and_cancels_runs(api: Any, alice: Any, bob: Any, guardrails: Any) -> None:
    run = run_for(alice.memberships.get().tenant)
    assert api(bob).get(f"{URL}/{run.pk}").status_code == 200
    started = api(bob).post(URL, {"tenant": "acme"}, format="json")
    assert started.status_code == 202
    assert api(bob).post(f"{URL}/{started.json()['id']}/cancel").status_code in (200, 409)


def test_charlie_sees_no_run_of_acme(api: Any, alice: Any, charlie: Any, charlie_key: str, guardrails: Any) -> None:
    run = run_for(alice.memberships.get().tenant)
    for client in (api(charlie), api(charlie_key)):
        assert client.get(f"{URL}/{run.pk}").status_code == 404
        assert client.post(f"{URL}/{run.pk}/cancel").status_code == 404
        assert client.get(URL).json()["results"] == []
    assert api(charlie).post(URL, {"tenant": "acme"}, format="json").status_code == 403
    assert api(charlie_key).post(URL, {"tenant": "acme"}, format="json").status_code == 403


def test_cancel_over_the_api(api: Any, alice: Any, acme: Any, guardrails: Any) -> None:
    run = evaluations.create_run(evaluations.RunRequest(tenant=acme))
    response = api(alice).post(f"{URL}/{run.pk}/cancel")
    assert response.status_code == 200 and response.json()["status"] == "cancelled"
    assert api(alice).post(f"{URL}/{run.pk}/cancel").status_code == 409


def test_the_list_is_newest_first_with_a_fixed_number_of_queries(
    api: Any, alice: Any, acme: Any, guardrails: Any
) -> None:
    for _ in range(3):
        evaluations.create_run(evaluations.RunRequest(tenant=acme))
    client = api(alice)
    client.get(URL)
    with CaptureQueriesContext(connection) as captured:
        small = client.get(URL + "?limit=2").json()
    assert app_queries(captured) <= 8, captured.captured_queries
    for _ in range(20):
        evaluations.create_run(evaluations.RunRequest(tenant=acme))
    with CaptureQueriesContext(connection) as again:
        big = client.get(URL + "?limit=20").json()
    assert app_queries(again) == app_queries(captured), again.captured_queries
    assert len(small["results"]) == 2 and small["next"]
    assert len(big["results"]) == 20
    ids = [r["id"] for r in big["results"]]
    assert ids == sorted(ids, reverse=True)
