"""The leased-job primitive (kindgi_console.jobs): claim, renew, recover, give up, and the
vocabulary the pages read. Uploads and the outbox stand for a job with a status and for a
leased row without one."""

from __future__ import annotations

import threading
from datetime import timedelta
from typing import Any

import pytest
from django.db import connections, transaction
from django.test import Client
from django.utils import timezone

from kindgi_console import jobs
from traces.models import PendingRuntimeEvaluation, Upload

on_postgresql = pytest.mark.postgresql("FOR UPDATE SKIP LOCKED is PostgreSQL's")

LEASE = timedelta(seconds=60)


def queued_uploads(tenant: Any, count: int) -> list[int]:
    made = Upload.objects.bulk_create(
        Upload(tenant=tenant, original_name=f"{n}.jsonl", file="x", lease_until=timezone.now() + LEASE)
        for n in range(count)
    )
    return [upload.pk for upload in made]


def expire(pk: int) -> None:
    Upload.objects.filter(pk=pk).update(lease_until=timezone.now() - timedelta(seconds=1))


def test_it_claims_a_queued_job_once_and_gives_it_a_lease_and_an_attempt(acme: Any) -> None:
    (pk,) = queued_uploads(acme, 1)
    assert jobs.claim(Upload.objects.filter(pk=pk), lease=LEASE) == [pk]
    assert jobs.claim(Upload.objects.filter(pk=pk), lease=LEASE) == []  # held: its lease is live
    upload = Upload.objects.get(pk=pk)
    assert (upload.status, upload.attempts) == ("running", 1)
    assert upload.lease_until is not None and upload.lease_until > timezone.now() + LEASE / 2


def test_a_running_job_whose_lease_ran_out_is_claimed_again(acme: Any) -> None:
    (pk,) = queued_uploads(acme, 1)
    jobs.claim(Upload.objects.filter(pk=pk), lease=LEASE)
    expire(pk)
    assert jobs.claim(Upload.objects.filter(pk=pk), lease=LEASE) == [pk]
    assert Upload.objects.get(pk=pk).attempts == 2


def test_a_leased_row_without_a_status_is_claimable_while_it_has_no_live_lease(db: Any) -> None:
    pending = PendingRuntimeEvaluation.objects.create(trace_ids=[1], lease_until=None)
    rows = PendingRuntimeEvaluation.objects.filter(pk=pending.pk)
    assert jobs.claim(rows, lease=LEASE) == [pending.pk]
    assert jobs.claim(rows, lease=LEASE) == []


def test_renew_keeps_a_running_job_and_tells_when_it_is_no_longer_held(acme: Any) -> None:
    (pk,) = queued_uploads(acme, 1)
    assert jobs.renew(Upload.objects.filter(pk=pk), lease=LEASE) is False  # queued: nobody holds it
    jobs.claim(Upload.objects.filter(pk=pk), lease=LEASE)
    assert jobs.renew(Upload.objects.filter(pk=pk), lease=2 * LEASE) is True
    assert Upload.objects.get(pk=pk).lease_until > timezone.now() + LEASE  # type: ignore[operator]
    jobs.fail(Upload.objects.filter(pk=pk), failure="gone")
    assert jobs.renew(Upload.objects.filter(pk=pk), lease=LEASE) is False


def test_an_expired_lease_is_queued_again_and_sent_once(acme: Any) -> None:
    held, lost, waiting = queued_uploads(acme, 3)
    jobs.claim(Upload.objects.filter(pk__in=[held, lost]), lease=LEASE, limit=2)
    expire(lost)
    sent: list[int] = []
    assert jobs.requeue_expired(Upload.objects.all(), lease=LEASE, send=sent.append) == 1
    assert sent == [lost]
    upload = Upload.objects.get(pk=lost)
    assert upload.status == "queued" and upload.lease_until > timezone.now()  # type: ignore[operator]
    assert jobs.requeue_expired(Upload.objects.all(), lease=LEASE, send=sent.append) == 0  # its message has the lease
    assert Upload.objects.get(pk=held).status == "running"
    assert Upload.objects.get(pk=waiting).status == "queued"


def test_the_queued_jobs_sent_before_the_broker_lost_its_messages_are_sent_again(acme: Any) -> None:
    (pk,) = queued_uploads(acme, 1)  # just sent: its lease is live
    sent: list[int] = []
    assert jobs.requeue_expired(Upload.objects.all(), lease=LEASE, send=sent.append) == 0
    lost_before = timezone.now()
    assert jobs.requeue_expired(Upload.objects.all(), lease=LEASE, send=sent.append, lost_before=lost_before) == 1
    assert jobs.requeue_expired(Upload.objects.all(), lease=LEASE, send=sent.append, lost_before=lost_before) == 0
    assert sent == [pk]


def test_a_send_that_cannot_reach_the_broker_ends_the_round(db: Any) -> None:
    past = timezone.now() - timedelta(seconds=1)
    first, second = PendingRuntimeEvaluation.objects.bulk_create(
        [
            PendingRuntimeEvaluation(trace_ids=[1], lease_until=past),
            PendingRuntimeEvaluation(trace_ids=[2], lease_until=past),
        ]
    )
    tried: list[int] = []

    def unreachable(pk: int) -> bool:
        tried.append(pk)
        return False

    assert jobs.requeue_expired(PendingRuntimeEvaluation.objects.all(), lease=LEASE, send=unreachable) == 0
    assert tried == [first.pk]
    assert PendingRuntimeEvaluation.objects.get(pk=second.pk).lease_until == past  # still due


def test_a_job_whose_attempts_are_exhausted_is_failed_with_the_reason(acme: Any) -> None:
    (pk,) = queued_uploads(acme, 1)
    limit = 3
    for _ in range(limit + 1):
        assert jobs.claim(Upload.objects.filter(pk=pk), lease=LEASE) == [pk]
        expire(pk)  # its worker was lost
    upload = Upload.objects.get(pk=pk)
    assert jobs.exhausted(upload.attempts, limit)
    assert jobs.fail(Upload.objects.filter(pk=pk), failure="lost 3 times") == 1
    upload.refresh_from_db()
    assert (upload.status, upload.failure, upload.lease_until) == ("failed", "lost 3 times", None)
    assert jobs.claim(Upload.objects.filter(pk=pk), lease=LEASE) == []  # final: never claimed again
    assert jobs.fail(Upload.objects.filter(pk=pk), failure="again") == 0


def test_every_kind_registers_its_recovery() -> None:
    assert set(jobs.recoverers()) == {"evaluation runs", "uploads", "runtime evaluations", "alert deliveries"}


def test_recover_all_runs_each_kind_with_when_the_broker_lost_its_messages(monkeypatch: Any) -> None:
    seen: list[Any] = []

    def recover_a(lost_before: Any) -> int:
        seen.append(lost_before)
        return 1

    monkeypatch.setattr(jobs, "_recoverers", {"a": recover_a, "b": lambda lost_before: 2})
    later = timezone.now() + timedelta(hours=1)
    assert jobs.recover_all(later) == {"a": 1, "b": 2}
    assert seen[0] <= timezone.now()  # never later than now


def test_the_vocabulary_says_which_statuses_are_final() -> None:
    final = {status["value"]: status["final"] for status in jobs.vocabulary()}
    assert final == {"queued": False, "running": False, "succeeded": True, "failed": True, "cancelled": True}


def test_every_page_serves_the_vocabulary_to_its_scripts(alice: Any) -> None:
    client = Client()
    client.force_login(alice)
    page = client.get("/uploads/").content.decode()
    assert '<script id="kindgi-job-statuses" type="application/json">' in page
    assert '{"value": "succeeded", "label": "Succeeded", "final": true}' in page


# ---------------------------------------------------------------------------- PostgreSQL, two connections


def claiming_until_empty(tenant_id: int, start: threading.Barrier, taken: list[int]) -> None:
    try:
        start.wait()
        while claimed := jobs.claim(Upload.objects.filter(tenant_id=tenant_id), lease=LEASE, limit=3):
            taken.extend(claimed)
    finally:
        connections.close_all()


@on_postgresql
@pytest.mark.django_db(transaction=True)
def test_two_workers_claiming_at_once_never_take_the_same_job(acme: Any) -> None:
    pks = queued_uploads(acme, 60)
    start = threading.Barrier(2)
    taken: tuple[list[int], list[int]] = ([], [])
    workers = [threading.Thread(target=claiming_until_empty, args=(acme.pk, start, mine)) for mine in taken]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=60)
    assert not set(taken[0]) & set(taken[1])
    assert sorted(taken[0] + taken[1]) == sorted(pks)
    assert set(Upload.objects.values_list("attempts", flat=True)) == {1}


def holding(pk: int, locked: threading.Event, release: threading.Event) -> None:
    try:
        with transaction.atomic():
            list(Upload.objects.select_for_update().filter(pk=pk).values_list("pk"))
            locked.set()
            release.wait(timeout=30)
    finally:
        connections.close_all()


@on_postgresql
@pytest.mark.django_db(transaction=True)
def test_a_job_another_connection_is_changing_is_skipped_not_waited_for(acme: Any) -> None:
    busy, free = queued_uploads(acme, 2)
    locked, release = threading.Event(), threading.Event()
    other = threading.Thread(target=holding, args=(busy, locked, release))
    other.start()
    try:
        assert locked.wait(timeout=30)
        assert jobs.claim(Upload.objects.filter(tenant=acme), lease=LEASE, limit=2) == [free]
    finally:
        release.set()
        other.join(timeout=30)
    assert jobs.claim(Upload.objects.filter(tenant=acme), lease=LEASE, limit=2) == [busy]
