"""Pages of evaluation runs and uploads: what alice sees, what charlie does not, query counts."""

from __future__ import annotations

from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import connection
from django.test.utils import CaptureQueriesContext

from tests.conftest import signed_in
from tests.traces.test_evaluations import store_traces
from traces.models import Evaluation, Upload
from traces.runs import chunks, evaluations


@pytest.fixture
def run(acme: Any, halt_guardrail: Any) -> Evaluation:
    store_traces(acme, 4)
    run = evaluations.create_run(evaluations.RunRequest(tenant=acme, label="alice"))
    chunks.start_run(run.pk)
    run.refresh_from_db()
    return run


def test_the_list_shows_runs_with_status_and_progress(alice: Any, run: Evaluation) -> None:
    page = signed_in(alice).get("/evaluations/")
    assert page.status_code == 200
    html = page.content.decode()
    assert f"/evaluations/{run.pk}/" in html and "pill--succeeded" in html and "4 / 4" in html
    assert "New evaluation" in html


def test_the_list_answers_with_a_fixed_number_of_queries(alice: Any, acme: Any, halt_guardrail: Any) -> None:
    client = signed_in(alice)
    counts = []
    for extra in (2, 30):
        for _ in range(extra):
            evaluations.create_run(evaluations.RunRequest(tenant=acme))
        with CaptureQueriesContext(connection) as queries:
            assert client.get("/evaluations/").status_code == 200
        counts.append(len(queries))
    assert counts[0] == counts[1]


def test_the_detail_page_has_a_live_progress_bar_and_the_summary(alice: Any, run: Evaluation) -> None:
    html = signed_in(alice).get(f"/evaluations/{run.pk}/").content.decode()
    assert f'data-progress-url="/api/v1/evaluations/{run.pk}"' in html
    assert "no-refunds" in html and "Summary per guardrail" in html


def test_the_new_run_form_counts_the_selected_traces_and_prefills_a_guardrail(
    alice: Any, acme: Any, halt_guardrail: Any
) -> None:
    store_traces(acme, 3)
    page = signed_in(alice).get("/evaluations/new/?guardrail=no-refunds&agent=support-bot")
    assert page.status_code == 200
    assert page.context["selected_traces"] == 3
    assert page.context["judge_estimate"] is None
    assert 'value="no-refunds" ' in page.content.decode() and "checked" in page.content.decode()


def test_starting_a_run_from_the_page(
    alice: Any, acme: Any, halt_guardrail: Any, django_capture_on_commit_callbacks: Any
) -> None:
    store_traces(acme, 3)
    with django_capture_on_commit_callbacks(execute=True):
        response = signed_in(alice).post("/evaluations/new/", {"guardrails": ["no-refunds"], "mode": "ci"})
    run = Evaluation.objects.get()
    assert response.status_code == 302 and response["Location"] == f"/evaluations/{run.pk}/"
    run.refresh_from_db()
    assert (run.status, run.total, run.started_by) == ("succeeded", 3, alice)


def test_a_reviewer_starts_and_cancels_runs(bob: Any, run: Evaluation) -> None:
    client = signed_in(bob)
    assert client.get("/evaluations/new/").status_code == 200
    assert client.post(f"/evaluations/{run.pk}/cancel/").status_code == 302
    assert "Run again" in client.get(f"/evaluations/{run.pk}/").content.decode()


def test_cancel_from_the_page(alice: Any, acme: Any, halt_guardrail: Any) -> None:
    run = evaluations.create_run(evaluations.RunRequest(tenant=acme))
    response = signed_in(alice).post(f"/evaluations/{run.pk}/cancel/")
    assert response.status_code == 302
    run.refresh_from_db()
    assert run.status == "cancelled"


def test_charlie_sees_no_run_and_no_upload_of_acme(alice: Any, charlie: Any, run: Evaluation) -> None:
    upload = Upload.objects.create(tenant=run.tenant, uploaded_by=alice, original_name="a.jsonl", file="x")
    client = signed_in(charlie)
    assert client.get(f"/evaluations/{run.pk}/").status_code == 404
    assert client.post(f"/evaluations/{run.pk}/cancel/").status_code == 404
    assert f"/evaluations/{run.pk}/" not in client.get("/evaluations/").content.decode()
    assert client.get(f"/uploads/{upload.pk}/").status_code == 404
    assert "a.jsonl" not in client.get("/uploads/").content.decode()
    assert client.get(f"/api/v1/uploads/{upload.pk}").status_code == 404


def test_uploading_from_the_page(alice: Any, acme: Any, django_capture_on_commit_callbacks: Any) -> None:
    client = signed_in(alice)
    assert client.get("/uploads/new/").status_code == 200
    data = b'{"id": "a", "output": "hi"}\n{"id": "b", "bogus": 1}\n'
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post("/uploads/new/", {"file": SimpleUploadedFile("t.jsonl", data), "tenant": "acme"})
    upload = Upload.objects.get()
    assert response["Location"] == f"/uploads/{upload.pk}/"
    html = client.get(response["Location"]).content.decode()
    assert "line 2" in html and "/bogus" in html
    assert client.get(f"/api/v1/uploads/{upload.pk}").json()["lines"]["stored"] == 1
    assert "t.jsonl" in client.get("/uploads/").content.decode()


def test_charlie_cannot_upload_for_acme(charlie: Any, globex: Any, acme: Any) -> None:
    response = signed_in(charlie).post(
        "/uploads/new/", {"file": SimpleUploadedFile("t.jsonl", b"{}\n"), "tenant": "acme"}
    )
    assert response.status_code == 200 and "tenant" in response.context["form"].errors
    assert not Upload.objects.exists()


def test_only_trace_files_are_accepted(alice: Any) -> None:
    response = signed_in(alice).post("/uploads/new/", {"file": SimpleUploadedFile("t.csv", b"a,b\n"), "tenant": "acme"})
    assert "file" in response.context["form"].errors
