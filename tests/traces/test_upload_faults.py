"""Uploads under hostile files and lost workers: bounded before anything is built, read in
resumable pieces, resumed where they stopped with exact counts, never left `running`."""

from __future__ import annotations

import gzip
from datetime import timedelta
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone

from tests.conftest import make_trace
from tests.traces.test_uploads import jsonl, upload_file
from traces.ingest import uploads
from traces.ingest.tasks import process_upload as process_upload_task
from traces.models import RunTrace, Upload
from traces.runs import chunks


def deep_array(depth: int) -> bytes:
    return b"[" * depth + b"]" * depth


def test_a_json_array_nested_deeper_than_the_limit_fails_the_upload_with_the_reason(acme: Any, alice: Any) -> None:
    data = gzip.compress(b"[" + orjson_trace("a") + b"," + deep_array(5000) + b"]")
    upload = upload_file(acme, alice, data, "deep.json.gz")
    assert upload.status == "failed"
    assert "element 2 is nested deeper than 64 levels" in upload.failure
    assert (upload.lines_total, upload.lines_stored) == (1, 1)


@pytest.mark.parametrize("position", [1, 2])
def test_an_array_element_far_over_the_trace_limit_fails_the_upload_before_it_is_built(
    acme: Any, alice: Any, settings: Any, position: int
) -> None:
    settings.KINDGI_MAX_TRACE_BYTES = 4096
    huge = orjson_dumps(make_trace("huge", output="x" * 2_000_000))
    elements = [orjson_trace("a"), huge] if position == 2 else [huge, orjson_trace("a")]
    upload = upload_file(acme, alice, gzip.compress(b"[" + b",".join(elements) + b"]"), "big.json.gz")
    assert upload.status == "failed"
    assert f"element {position} is over the limit of 4096 bytes" in upload.failure


def test_an_array_element_a_little_over_the_limit_is_one_bad_trace(acme: Any, alice: Any, settings: Any) -> None:
    settings.KINDGI_MAX_TRACE_BYTES = 4096
    elements = [orjson_trace("a"), orjson_dumps(make_trace("big", output="x" * 5000)), orjson_trace("b")]
    upload = upload_file(acme, alice, b"[" + b",".join(elements) + b"]", "t.json")
    assert (upload.status, upload.lines_stored, upload.lines_invalid) == ("succeeded", 2, 1)


def test_a_json_line_nested_deeper_than_the_limit_is_refused_before_it_is_parsed(acme: Any, alice: Any) -> None:
    deep = b'{"id": "deep", "x": ' + deep_array(70) + b"}"
    upload = upload_file(acme, alice, jsonl(make_trace("a"), deep, make_trace("b")))
    assert (upload.status, upload.lines_stored, upload.lines_invalid) == ("succeeded", 2, 1)
    assert upload.errors[0] == {"line": 2, "item": None, "path": "", "message": "is nested deeper than 64 levels"}


def test_brackets_inside_strings_are_not_nesting(acme: Any, alice: Any) -> None:
    upload = upload_file(acme, alice, jsonl(make_trace("a", output="[" * 200 + " {{{ [[[")))
    assert (upload.status, upload.lines_stored) == ("succeeded", 1)


def test_a_file_that_expands_past_the_decompressed_limit_fails(acme: Any, alice: Any, settings: Any) -> None:
    settings.KINDGI_UPLOAD_MAX_BYTES_DECOMPRESSED = 200_000
    settings.KINDGI_UPLOAD_BATCH = 50
    data = gzip.compress(jsonl(*[make_trace(f"t{n}") for n in range(1000)]))
    upload = upload_file(acme, alice, data, "t.jsonl.gz")
    assert upload.status == "failed" and "expands to more than 200000 bytes" in upload.failure
    assert 0 < upload.lines_stored < 1000 and upload.lines_stored == RunTrace.objects.count()


def test_a_long_run_of_blank_lines_fails_the_upload_at_once(acme: Any, alice: Any, settings: Any) -> None:
    settings.KINDGI_UPLOAD_MAX_BLANK_LINES = 1000
    data = gzip.compress(jsonl(make_trace("a")) + b"\n" * 5_000_000 + jsonl(make_trace("b")))
    upload = upload_file(acme, alice, data, "blank.jsonl.gz")
    assert upload.status == "failed" and "more than 1000 blank lines in a row" in upload.failure
    assert upload.lines_stored == 1


class Sent:
    """Messages of the next pieces, captured instead of being run at once."""

    def __init__(self, monkeypatch: Any) -> None:
        from traces.ingest.tasks import process_upload

        self.ids: list[int] = []
        monkeypatch.setattr(process_upload, "apply_async", lambda args, **_: self.ids.append(args[0]))


@pytest.mark.parametrize("bound", [{"KINDGI_UPLOAD_PIECE_LINES": 4}, {"KINDGI_UPLOAD_PIECE_SECONDS": 0}])
def test_an_upload_is_read_in_pieces_each_one_its_own_task(
    acme: Any, alice: Any, settings: Any, monkeypatch: Any, bound: dict[str, int]
) -> None:
    settings.KINDGI_UPLOAD_BATCH = 2
    for name, value in bound.items():
        setattr(settings, name, value)
    sent = Sent(monkeypatch)
    upload = uploads.save_upload(_file(jsonl(*[make_trace(f"t{n}") for n in range(9)])), acme, alice)
    pieces = 0
    for pieces in range(1, 20):
        uploads.process_upload(upload.pk)
        upload.refresh_from_db()
        if upload.status != "queued":
            break
        assert sent.ids.pop() == upload.pk and upload.lease_until is not None and upload.lease_until > timezone.now()
    assert pieces == (3 if "KINDGI_UPLOAD_PIECE_LINES" in bound else 5)
    assert (upload.status, upload.lines_total, upload.lines_stored) == ("succeeded", 9, 9)


class WorkerLost(BaseException):
    """Stands for SIGKILL: nothing after it runs, nothing catches it."""


def lose_the_worker_at_batch(monkeypatch: Any, number: int) -> None:
    real = uploads.store_batch
    calls = [0]

    def store_batch(*args: Any) -> None:
        calls[0] += 1
        if calls[0] == number:
            raise WorkerLost
        real(*args)

    monkeypatch.setattr(uploads, "store_batch", store_batch)


@pytest.mark.parametrize("name", ["t.jsonl", "t.jsonl.gz", "t.json", "t.json.gz"])
def test_a_lost_upload_is_resumed_where_it_stopped_with_exact_counts(
    acme: Any, alice: Any, settings: Any, monkeypatch: Any, name: str
) -> None:
    settings.KINDGI_UPLOAD_BATCH = 10
    RunTrace.objects.create(tenant=acme, trace_id="t5", document={}, content_hash="other")
    documents = [make_trace(f"t{n}") for n in range(100)] + [make_trace("t3"), make_trace("t7")]
    data = jsonl(*documents) if ".jsonl" in name else b"[" + b",".join(map(orjson_dumps, documents)) + b"]"
    data = gzip.compress(data) if name.endswith(".gz") else data
    upload = uploads.save_upload(_file(data, name), acme, alice)
    lose_the_worker_at_batch(monkeypatch, 4)
    with pytest.raises(WorkerLost):
        uploads.process_upload(upload.pk)
    monkeypatch.undo()
    upload.refresh_from_db()
    assert (upload.status, upload.lines_total, upload.resume_at) == ("running", 30, 30)

    Upload.objects.filter(pk=upload.pk).update(lease_until=timezone.now() - timedelta(seconds=1))
    chunks.requeue_expired_work()  # the recovery check; the task it sends runs here
    upload.refresh_from_db()
    assert upload.status == "succeeded"
    assert (upload.lines_total, upload.lines_stored, upload.lines_duplicate, upload.lines_conflict) == (102, 99, 2, 1)
    assert RunTrace.objects.filter(upload=upload).count() == 99


def test_a_piece_cut_by_the_time_limit_is_taken_up_by_the_next_task(
    acme: Any, alice: Any, settings: Any, monkeypatch: Any
) -> None:
    from celery.exceptions import SoftTimeLimitExceeded

    settings.KINDGI_UPLOAD_BATCH = 2
    real, calls = uploads.store_batch, [0]

    def store_batch(*args: Any) -> None:
        calls[0] += 1
        real(*args)
        if calls[0] == 2:
            raise SoftTimeLimitExceeded  # the batch's transaction is rolled back

    monkeypatch.setattr(uploads, "store_batch", store_batch)
    upload = upload_file(acme, alice, jsonl(*[make_trace(f"t{n}") for n in range(5)]))
    assert (upload.status, upload.lines_total, upload.lines_stored) == ("succeeded", 5, 5)


def test_a_piece_that_fails_for_good_fails_the_upload_with_the_reason(
    acme: Any, alice: Any, settings: Any, monkeypatch: Any
) -> None:
    settings.KINDGI_UPLOAD_BATCH = 2

    def store_batch(*args: Any) -> None:
        raise ValueError("something unexpected")

    monkeypatch.setattr(uploads, "store_batch", store_batch)
    upload = uploads.save_upload(_file(jsonl(make_trace("a"))), acme, alice)
    assert process_upload_task.apply((upload.pk,), throw=False).failed()  # as a worker runs it
    upload.refresh_from_db()
    assert upload.status == "failed" and "ValueError: something unexpected" in upload.failure


def test_an_upload_is_saved_and_answered_while_the_broker_is_down(
    acme: Any, alice: Any, monkeypatch: Any, django_capture_on_commit_callbacks: Any
) -> None:
    from kombu.exceptions import OperationalError

    def unreachable(*args: Any, **kwargs: Any) -> None:
        raise OperationalError("Error 111 connecting to 127.0.0.1:6379. Connection refused.")

    monkeypatch.setattr(process_upload_task, "apply_async", unreachable)
    client = Client()
    client.force_login(alice)
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post("/uploads/new/", {"file": _file(jsonl(make_trace("a"))), "tenant": "acme"})
    assert response.status_code == 302
    upload = Upload.objects.get()
    assert upload.status == "queued" and upload.lease_until is not None
    assert upload.lease_until > timezone.now()  # the check sends it later


def test_an_upload_lost_again_and_again_fails_with_the_reason_on_its_page(
    acme: Any, alice: Any, settings: Any, monkeypatch: Any
) -> None:
    sent = Sent(monkeypatch)
    upload = uploads.save_upload(_file(jsonl(make_trace("a"))), acme, alice)
    for _ in range(settings.KINDGI_CHUNK_MAX_ATTEMPTS):
        assert uploads.claim_upload(upload.pk) is not None  # taken, then its worker lost
        Upload.objects.filter(pk=upload.pk).update(lease_until=timezone.now() - timedelta(seconds=1))
        chunks.requeue_expired_work()
        assert sent.ids == [upload.pk]
        upload.refresh_from_db()
        assert upload.status == "queued"
        sent.ids.clear()
    uploads.process_upload(upload.pk)  # the message of the last recovery
    upload.refresh_from_db()
    assert upload.status == "failed" and "was lost 5 times in a row at its start" in upload.failure
    client = Client()
    client.force_login(alice)
    assert "was lost 5 times in a row" in client.get(f"/uploads/{upload.pk}/").content.decode()


def test_a_task_whose_upload_was_taken_over_writes_nothing_more(acme: Any, alice: Any, settings: Any) -> None:
    settings.KINDGI_UPLOAD_BATCH = 1
    upload = uploads.save_upload(_file(jsonl(make_trace("a"), make_trace("b"))), acme, alice)
    first = uploads.claim_upload(upload.pk)
    Upload.objects.filter(pk=upload.pk).update(lease_until=timezone.now() - timedelta(seconds=1))
    assert uploads.claim_upload(upload.pk) is not None
    assert first is not None
    with pytest.raises(uploads.LostClaim):
        uploads.read_piece(first)
    assert not RunTrace.objects.exists()


def orjson_trace(trace_id: str) -> bytes:
    return orjson_dumps(make_trace(trace_id))


def orjson_dumps(document: Any) -> bytes:
    import orjson

    return orjson.dumps(document)


def _file(data: bytes, name: str = "t.jsonl") -> Any:
    from django.core.files.uploadedfile import SimpleUploadedFile

    return SimpleUploadedFile(name, data)
