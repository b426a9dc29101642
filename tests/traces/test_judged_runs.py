"""A run of an llm-judge guardrail over 2,000 traces, its judge answering in 0.2 s over a real
socket, run to the end by a real worker whose tasks may take 15 s at most: judged one
after another, a chunk of 1,000 traces would need 200 s and be killed at its time limit.

A chunk makes its judge calls several at once, stops after its own few seconds, keeps what
it stored and hands the rest back as a new chunk, until every trace has its result.
"""

from __future__ import annotations

from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User

from guardrails.services import Author, save_guardrail
from tests.fakeproviders import FakeProvider
from tests.traces.test_judge_ledger import judge_document
from tests.traces.test_run_faults import stored_counts
from tests.traces.test_worker_recovery import real_broker, store_many  # noqa: F401
from tests.traces.workers import Worker, wait_for
from traces.models import Evaluation, EvaluationChunk, EvaluationResult, JudgeLedgerEntry
from traces.runs import evaluations

pytestmark = [pytest.mark.services, pytest.mark.django_db(transaction=True)]

TRACES = 2_000
WORKER_SETTINGS: dict[str, Any] = {
    "CELERY_TASK_TIME_LIMIT": 15,
    "CELERY_TASK_SOFT_TIME_LIMIT": 12,
    "KINDGI_CHUNK_SECONDS": 4,
    "KINDGI_JUDGE_CONCURRENCY": 32,
    # A judge assumed fast: chunks of 1,000 traces, each of which runs out of its time.
    "KINDGI_JUDGE_CALL_ESTIMATE_MS": 5,
    "KINDGI_EVALUATION_CHUNK_SIZE": 1_000,
}


def test_a_judged_run_of_2000_traces_ends_with_every_result_whatever_its_time_limit(
    acme: Any, root: User, api: Any, real_broker: Any, tmp_path: Path
) -> None:
    with FakeProvider(delay_s=0.2) as provider:
        response = api(root).post("/api/v1/judge-models", data=provider.registration("slow"), format="json")
        assert response.status_code == 201, response.json()
        save_guardrail(judge_document(), Author(user=None, label="fixture"))
        store_many(acme, TRACES)
        run = evaluations.create_run(evaluations.RunRequest(tenant=acme, label="judged run"))
        worker = Worker("judged", tmp_path, concurrency=2, **WORKER_SETTINGS)
        try:
            wait_for(lambda: Evaluation.objects.get(pk=run.pk).is_final, 300, "the run to end", worker)
        finally:
            worker.stop()
        calls = len(provider.requests)

    run.refresh_from_db()
    assert (run.status, run.error, run.done, run.total) == ("succeeded", "", TRACES, TRACES), worker.output()
    results = EvaluationResult.objects.filter(evaluation=run)
    assert results.values("trace_id").distinct().count() == TRACES
    assert results.count() == TRACES
    assert not results.exclude(status__in=["pass", "fail"]).exists(), list(results.exclude(status="pass")[:3])
    # Each trace judged once: the traces a chunk handed back had not been judged.
    assert calls == TRACES
    assert JudgeLedgerEntry.objects.filter(evaluation=run).count() == TRACES
    assert run.summary == {
        guardrail: {"pass": 0, "fail": 0, "error": 0, "skipped": 0, **counts}
        for guardrail, counts in stored_counts(run).items()
    }
    chunks = EvaluationChunk.objects.filter(evaluation=run)
    assert chunks.count() > 2, "no chunk ran out of its time: the hand-back was not tested"
    assert set(chunks.values_list("status", flat=True)) == {"succeeded"}
    assert sum(chunks.values_list("size", flat=True)) == sum(chunks.values_list("progress", flat=True)) == TRACES
    # The chunks' ranges still cover each trace once.
    ranges = sorted(chunks.values_list("first_pk", "last_pk"))
    assert all(last < first for (_, last), (first, _) in pairwise(ranges))
