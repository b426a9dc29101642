"""Uploads: parsing .jsonl, .json arrays and gzip in bounded memory, bad lines, idempotency."""

from __future__ import annotations

import gzip
import io
import json
from typing import Any

import orjson
import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from tests.conftest import make_trace
from traces.ingest.trace_files import parse_file
from traces.ingest.uploads import process_upload, save_upload
from traces.models import Evaluation, RunTrace, Upload


def jsonl(*documents: Any) -> bytes:
    return b"\n".join(d if isinstance(d, bytes) else orjson.dumps(d) for d in documents) + b"\n"


def parsed(data: bytes, name: str) -> list[tuple[Any, Any, Any]]:
    return [(p.line or p.item, (p.document or {}).get("id"), p.error) for p in parse_file(io.BytesIO(data), name)]


def test_it_reads_json_lines_skipping_blank_ones_and_numbering_lines() -> None:
    data = jsonl(make_trace("a"), b"", b"{not json", make_trace("b"))
    rows = parsed(data, "traces.jsonl")
    assert [(n, i) for n, i, _ in rows] == [(1, "a"), (3, None), (4, "b")]
    assert rows[1][2].startswith("not valid JSON")


def test_a_bad_line_names_a_place_within_that_line_not_the_next_line() -> None:
    rows = parsed(jsonl(make_trace("a"), b'{"id": "b"', b'{"id": x}'), "traces.jsonl")
    assert rows[1][0] == 2 and rows[1][2] == "not valid JSON (unexpected end of data at the end of the line)"
    assert rows[2][0] == 3 and rows[2][2].startswith("not valid JSON (") and "at column 8)" in rows[2][2]
    assert "line 2 column 1" not in rows[1][2]


def test_it_reads_a_json_array_one_element_at_a_time() -> None:
    data = json.dumps([make_trace("a"), make_trace("b", usage={"costUsd": 0.25})], indent=2).encode()
    rows = list(parse_file(io.BytesIO(data), "traces.json"))
    assert [(p.item, p.document["id"]) for p in rows] == [(1, "a"), (2, "b")]
    assert rows[1].document["usage"]["costUsd"] == 0.25


def test_a_single_trace_is_a_json_file_too() -> None:
    assert parsed(orjson.dumps(make_trace("solo")), "one.json") == [(1, "solo", None)]


def test_gzip_is_recognised_by_its_magic_bytes() -> None:
    data = gzip.compress(jsonl(make_trace("a"), make_trace("b")))
    assert [i for _, i, _ in parsed(data, "traces.jsonl.gz")] == ["a", "b"]
    assert [i for _, i, _ in parsed(data, "renamed.jsonl")] == ["a", "b"]


def test_a_broken_array_reports_where_it_broke() -> None:
    data = b"[" + orjson.dumps(make_trace("a")) + b', {"id": '
    rows = parsed(data, "broken.json")
    assert rows[0][:2] == (1, "a") and rows[1][0] == 2 and "not valid JSON" in rows[1][2]


def test_a_broken_array_read_again_from_past_the_break_reports_it_once() -> None:
    from traces.ingest.trace_files import Position

    data = b"[" + orjson.dumps(make_trace("a")) + b', {"id": '
    assert list(parse_file(io.BytesIO(data), "broken.json", Position(count=2))) == []
    assert [p.item for p in parse_file(io.BytesIO(data), "broken.json", Position(count=1))] == [2]


def test_a_line_over_the_limit_is_refused_alone(settings: Any) -> None:
    settings.KINDGI_MAX_TRACE_BYTES = 2048
    data = jsonl(make_trace("a", metadata={"blob": "x" * 5000}), make_trace("b"))
    rows = parsed(data, "t.jsonl")
    assert rows[0][0] == 1 and "over the limit" in rows[0][2]
    assert rows[1][:2] == (2, "b")


def upload_file(tenant: Any, user: Any, data: bytes, name: str = "traces.jsonl", **kwargs: Any) -> Upload:
    upload = save_upload(SimpleUploadedFile(name, data), tenant, user, **kwargs)
    process_upload(upload.pk)
    upload.refresh_from_db()
    return upload


def test_it_stores_good_lines_and_reports_bad_ones_with_line_numbers(acme: Any, alice: Any, settings: Any) -> None:
    settings.KINDGI_UPLOAD_BATCH = 2
    RunTrace.objects.create(tenant=acme, trace_id="taken", document={"id": "taken"}, content_hash="other")
    data = jsonl(
        make_trace("a"),
        {"id": "b", "toolcalls": []},
        make_trace("a"),
        make_trace("taken"),
        make_trace("c", tenant="globex"),
        b"[1,",
        make_trace("d"),
    )
    upload = upload_file(acme, alice, data)
    assert upload.status == "succeeded"
    assert (
        upload.lines_total,
        upload.lines_stored,
        upload.lines_duplicate,
        upload.lines_conflict,
        upload.lines_invalid,
    ) == (7, 2, 1, 1, 3)
    assert [(e["line"], e["path"]) for e in upload.errors] == [(2, "/toolcalls"), (4, "/id"), (5, "/tenant"), (6, "")]
    assert "toolcalls" in upload.errors[0]["message"]
    assert set(RunTrace.objects.filter(upload=upload).values_list("trace_id", flat=True)) == {"a", "d"}
    assert upload.bytes_read == upload.size == len(data)


def test_the_same_file_twice_stores_nothing_twice(acme: Any, alice: Any) -> None:
    data = gzip.compress(json.dumps([make_trace("a"), make_trace("b")]).encode())
    first = upload_file(acme, alice, data, "t.json.gz")
    second = upload_file(acme, alice, data, "t.json.gz")
    assert (first.lines_stored, second.lines_stored, second.lines_duplicate) == (2, 0, 2)
    assert RunTrace.objects.count() == 2
    assert RunTrace.objects.filter(upload=second).count() == 2  # the latest upload that delivered them


def test_the_stored_error_list_is_capped_but_every_error_is_counted(acme: Any, alice: Any, settings: Any) -> None:
    settings.KINDGI_UPLOAD_MAX_ERRORS = 3
    upload = upload_file(acme, alice, b"nope\n" * 10)
    assert (len(upload.errors), upload.errors_total, upload.lines_invalid) == (3, 10, 10)


def test_a_corrupt_gzip_fails_the_upload_with_the_reason(acme: Any, alice: Any) -> None:
    data = gzip.compress(jsonl(make_trace("a")) * 50)[:-30] + b"garbage-garbage-garbage-garbag"
    upload = upload_file(acme, alice, data, "t.jsonl.gz")
    assert upload.status == "failed" and "cannot be read" in upload.failure


def test_an_evaluation_can_start_after_the_upload(
    acme: Any, alice: Any, halt_guardrail: Any, django_capture_on_commit_callbacks: Any
) -> None:
    with django_capture_on_commit_callbacks(execute=True):
        upload = upload_file(acme, alice, jsonl(make_trace("a"), make_trace("b")), evaluate_after=True)
    run = Evaluation.objects.get(pk=upload.evaluation_id or 0)
    assert run.trace_filters == {"upload": upload.pk}
    assert (run.status, run.total, run.started_by) == ("succeeded", 2, alice)
    assert run.summary["no-refunds"]["fail"] == 2


@pytest.mark.django_db(transaction=True)
def test_uploaded_batches_are_evaluated_in_runtime_mode(acme: Any, alice: Any, halt_guardrail: Any) -> None:
    upload_file(acme, alice, jsonl(make_trace("a"), make_trace("b", toolCalls=[])))
    assert dict(RunTrace.objects.values_list("trace_id", "withheld")) == {"a": True, "b": False}


def test_the_empty_uploads_page_says_what_each_person_can_do(client: Any, alice: Any, bob: Any) -> None:
    client.force_login(bob)  # a reviewer cannot upload: no upload button, a way to what they can do
    page = client.get("/uploads/").content.decode()
    assert 'href="/uploads/new/"' not in page
    assert "as a reviewer you can read the traces" in page and 'href="/traces/"' in page
    client.force_login(alice)
    assert 'href="/uploads/new/"' in client.get("/uploads/").content.decode()
