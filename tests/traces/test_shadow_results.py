"""A guardrail in shadow through the bulk writer: its results are stored marked `shadow`,
its fails are no violation, on each path (COPY of a fresh batch, COPY into the load table,
the VALUES statement of a few rows)."""

from __future__ import annotations

from typing import Any

import pytest

from guardrails.models import Guardrail
from tests.traces.test_evaluations import store_traces
from traces.models import Evaluation, EvaluationResult, Violation
from traces.runs import chunks, evaluations
from traces.store import bulk

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.mark.parametrize(("count", "fresh"), [(60, True), (60, False), (6, False)])
def test_a_shadow_guardrail_records_results_and_no_violation(
    acme: Any, guardrails: Any, count: int, fresh: bool
) -> None:
    Guardrail.objects.filter(guardrail_id="no-refunds").update(shadow=True)
    store_traces(acme, count)
    run = evaluations.create_run(evaluations.RunRequest(tenant=acme, label="shadow"))
    Evaluation.objects.filter(pk=run.pk).update(status="running")
    targets = chunks.run_targets(run)
    batch = next(bulk.stored_traces(evaluations.run_traces(run), count))
    assert chunks.evaluate_batch(run, targets, batch, fresh=fresh)
    shadowed = EvaluationResult.objects.filter(evaluation=run, guardrail__guardrail_id="no-refunds")
    assert shadowed.count() == count and not shadowed.filter(shadow=False).exists()
    assert shadowed.filter(status="fail").count() == count // 3  # every third trace refunds
    assert not Violation.objects.filter(evaluation=run, guardrail__guardrail_id="no-refunds").exists()
    assert (
        not EvaluationResult.objects.filter(evaluation=run)
        .exclude(guardrail__guardrail_id="no-refunds")
        .filter(shadow=True)
        .exists()
    )
