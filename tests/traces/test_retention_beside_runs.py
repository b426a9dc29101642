"""Retention beside a run, on real PostgreSQL connections at once: two retention passes (a
slow pass overtaken by the next) delete old traces while a run writes the violations of
the same traces, and the violations' daily roll-up still equals a recount of them."""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from django.db import connections
from django.utils import timezone

from guardrails.services import Author, save_guardrail
from tests.conftest import make_guardrail, make_trace
from tests.traces.seed import run_trace
from tests.traces.test_retention import violation_days_match_violations
from traces.models import Evaluation, RetentionPolicy, RunTrace, Violation, ViolationDay
from traces.runs import chunks, evaluations
from traces.store import bulk, retention

pytestmark = [pytest.mark.services, pytest.mark.django_db(transaction=True)]

TRACES = 400
OLD = timezone.now() - timedelta(days=40)


def in_threads(*work: Callable[[], None]) -> list[BaseException]:
    """Run each function on a thread of its own (its own connection), all at once."""
    errors: list[BaseException] = []
    start = threading.Barrier(len(work))

    def run(function: Callable[[], None]) -> None:
        try:
            start.wait()
            function()
        except BaseException as error:
            errors.append(error)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=run, args=(function,)) for function in work]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    return errors


def test_retention_beside_a_run_keeps_the_violations_roll_up_exact(acme: Any, settings: Any) -> None:
    settings.KINDGI_RETENTION_BATCH = 40
    save_guardrail(make_guardrail(), Author(user=None, label="fixture"))  # every trace here fails it
    RunTrace.objects.bulk_create(
        [run_trace(acme, make_trace(f"old-{n:05d}", tenant=acme.slug), received_at=OLD) for n in range(TRACES)]
    )
    run = Evaluation.objects.create(tenant=acme, status="running", started_by_label="beside retention")
    run.revisions.set(evaluations.pinned_revisions([], acme))
    targets = chunks.run_targets(run)
    # What the run read before retention began: it writes their results and violations as
    # retention deletes the traces.
    batches = list(bulk.stored_traces(evaluations.run_traces(run), 20))
    RetentionPolicy.objects.create(tenant=acme, days=30)

    def write() -> None:
        for batch in batches:
            chunks.evaluate_batch(run, targets, batch)

    def delete() -> None:
        for _ in range(200):
            if not retention.apply_retention():
                return

    errors = in_threads(write, delete, delete)
    assert not errors, errors
    assert Violation.objects.exists(), "retention deleted everything before the run wrote: nothing was tested"
    assert ViolationDay.objects.exclude(count=0).exists()
    assert violation_days_match_violations(), (
        sum(ViolationDay.objects.values_list("count", flat=True)),
        Violation.objects.count(),
    )
