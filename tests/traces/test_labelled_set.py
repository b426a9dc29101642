"""A guardrail's labelled set: calibration labels and review verdicts, one per trace; its export
as JSON Lines (tenant-scoped), Preview impact's figures on it, and `guardrail_ci --labels` on
the exported file."""

from __future__ import annotations

import io
import json
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.utils import timezone

from guardrails.engine.cli import run_guardrail_ci
from guardrails.services import Author, save_guardrail
from tests.conftest import make_guardrail, signed_in
from tests.traces.test_evaluations import run_for, store_traces
from tests.traces.test_previews import STRICTER
from traces.models import CalibrationItem, CalibrationSample, GuardrailPreview, RunTrace, Violation
from traces.runs import preview_labels
from traces.store import labelled_set

URL = "/api/v1/guardrails/no-refunds/labelled-set"


def label_calibration(guardrail: Any, tenant: Any, labels: dict[str, str], who: str = "bob") -> None:
    """A calibration sample of the guardrail's current revision, its traces labelled as given."""
    sample = CalibrationSample.objects.create(
        tenant=tenant,
        guardrail=guardrail,
        revision=guardrail.revisions.get(number=guardrail.revision),
        size=len(labels),
    )
    now = timezone.now()
    for n, (trace_id, label) in enumerate(labels.items()):
        CalibrationItem.objects.create(
            tenant=tenant,
            sample=sample,
            trace=RunTrace.objects.get(tenant=tenant, trace_id=trace_id),
            judge_status="pass",
            label=label,
            labelled_by_label=who,
            labelled_at=now - timedelta(minutes=n),
        )


def review(trace_id: str, state: str, who: str = "bob", minutes_ago: int = 30) -> None:
    Violation.objects.filter(trace__trace_id=trace_id).update(
        state=state, reviewed_by_label=who, reviewed_at=timezone.now() - timedelta(minutes=minutes_ago)
    )


@pytest.fixture
def labelled(acme: Any, halt_guardrail: Any) -> Any:
    """acme's nine traces (0, 3 and 6 call issue_refund: violations of no-refunds), labelled:
    0 confirmed and 3 resolved (fail), 6 a false positive overruled by a calibration label
    (fail), 1 labelled fail (the guardrail misses it) and 2 pass; 4 and 5 unlabelled."""
    store_traces(acme, 9)
    run_for(acme)
    review("run-00000", Violation.State.ACKNOWLEDGED)
    review("run-00003", Violation.State.RESOLVED, minutes_ago=40)
    review("run-00006", Violation.State.FALSE_POSITIVE)
    label_calibration(halt_guardrail, acme, {"run-00001": "fail", "run-00002": "pass", "run-00006": "fail"})
    return halt_guardrail


def records(answer: Any) -> list[dict[str, Any]]:
    return [json.loads(line) for line in b"".join(answer.streaming_content).splitlines()]


# --- the set --------------------------------------------------------------------------------


def test_the_set_is_one_label_per_trace_calibration_before_review(acme: Any, labelled: Any) -> None:
    found = labelled_set.labels(CalibrationItem.objects.all(), Violation.objects.all(), labelled)
    by_trace = {RunTrace.objects.get(pk=label.trace_pk).trace_id: (label.expected, label.source) for label in found}
    assert by_trace == {
        "run-00000": ("fail", "review"),
        "run-00001": ("fail", "calibration"),
        "run-00002": ("pass", "calibration"),
        "run-00003": ("fail", "review"),
        "run-00006": ("fail", "calibration"),
    }
    assert labelled_set.count(CalibrationItem.objects.all(), Violation.objects.all(), labelled) == 5


def test_an_open_violation_is_no_label_and_the_newest_calibration_label_wins(acme: Any, labelled: Any) -> None:
    label_calibration(labelled, acme, {"run-00002": "fail"}, who="erin")  # newer than bob's pass
    Violation.objects.filter(trace__trace_id="run-00000").update(state=Violation.State.OPEN)
    found = {
        RunTrace.objects.get(pk=label.trace_pk).trace_id: (label.expected, label.labelled_by)
        for label in labelled_set.labels(CalibrationItem.objects.all(), Violation.objects.all(), labelled)
    }
    assert "run-00000" not in found
    assert found["run-00002"] == ("fail", "erin")


# --- the export -----------------------------------------------------------------------------


def test_the_export_is_json_lines_of_the_trace_the_label_who_and_when(api: Any, acme_key: str, labelled: Any) -> None:
    answer = api(acme_key).get(URL)
    assert answer.status_code == 200
    assert answer["Content-Type"] == "application/x-ndjson"
    assert answer["Content-Disposition"] == 'attachment; filename="no-refunds.labels.jsonl"'
    lines = records(answer)
    assert [line["trace"]["id"] for line in lines][:1] == ["run-00001"]  # the newest label first
    assert {line["trace"]["id"]: line["expected"] for line in lines} == {
        "run-00000": "fail",
        "run-00001": "fail",
        "run-00002": "pass",
        "run-00003": "fail",
        "run-00006": "fail",
    }
    first = lines[0]
    assert first["guardrail"] == "no-refunds" and first["tenant"] == "acme" and first["revision"] == 1
    assert first["source"] == "calibration" and first["labelledBy"] == "bob" and first["labelledAt"]
    assert first["trace"] == RunTrace.objects.get(trace_id="run-00001").document


def test_another_tenant_gets_none_of_the_labels(
    api: Any, charlie: Any, charlie_key: str, acme: Any, labelled: Any
) -> None:
    # no-refunds is console-wide: globex reads it, and none of acme's labels or traces
    for outsider in (api(charlie), api(charlie_key)):
        for url in (URL, f"{URL}?tenant=acme"):
            answer = outsider.get(url)
            assert answer.status_code == 200 and records(answer) == []
        assert outsider.post(URL, {}, format="json").status_code in (403, 404, 405)
    html = signed_in(charlie).get("/guardrails/no-refunds/").content.decode()
    assert "data-labelled-count>0<" in html and "data-labelled-set-download" not in html
    assert labelled_set.count(CalibrationItem.objects.all(), Violation.objects.all(), labelled) == 5


def test_another_tenants_guardrail_is_a_404(api: Any, charlie: Any, charlie_key: str, acme: Any) -> None:
    owned = save_guardrail(make_guardrail("acme-only"), Author(user=None, label="t"), owner=acme)
    store_traces(acme, 3)
    label_calibration(owned, acme, {"run-00000": "fail"})
    for outsider in (api(charlie), api(charlie_key)):
        assert outsider.get("/api/v1/guardrails/acme-only/labelled-set").status_code == 404
        assert outsider.post("/api/v1/guardrails/acme-only/labelled-set", {}, format="json").status_code in (
            403,
            404,
            405,
        )
    assert CalibrationItem.objects.get().label == "fail"


def test_the_guardrail_page_counts_the_set_and_links_its_download(bob: Any, labelled: Any) -> None:
    html = signed_in(bob).get("/guardrails/no-refunds/").content.decode()
    assert "data-labelled-count>5<" in html
    assert f'href="{URL}?tenant=acme" download data-labelled-set-download' in html
    answer = signed_in(bob).get(f"{URL}?tenant=acme")
    assert answer.status_code == 200 and len(records(answer)) == 5


# --- Preview impact -------------------------------------------------------------------------


@pytest.fixture
def previewed(api: Any, alice: Any, labelled: Any, django_capture_on_commit_callbacks: Any) -> Any:
    def start(draft: dict[str, Any]) -> dict[str, Any]:
        with django_capture_on_commit_callbacks(execute=True):
            answer = api(alice).post(
                "/api/v1/guardrails/preview", {"tenant": "acme", "guardrail": draft}, format="json"
            )
        assert answer.status_code == 202, answer.json()
        body: dict[str, Any] = api(alice).get(answer.json()["url"]).json()
        assert body["status"] == "succeeded", body["error"]
        return body

    return start


def test_a_preview_measures_the_draft_and_the_current_revision_on_the_labelled_set(previewed: Any) -> None:
    body = previewed(STRICTER)
    assert body["counts"] == {"newlyFailing": 6, "noLongerFailing": 0, "unchanged": 3}
    assert body["progress"] == {"done": 14, "total": 14, "percent": 100}  # 9 selected, 5 labelled
    ls = body["labelledSet"]
    assert (ls["total"], ls["evaluated"], ls["capped"]) == (5, 5, False)
    current, draft = ls["current"], ls["draft"]
    assert (current["truePositives"], current["falseNegatives"], current["trueNegatives"]) == (3, 1, 1)
    assert current["precision"]["value"] == 1.0 and current["recall"]["value"] == 0.75
    assert current["recall"]["interval"][0] < 0.75 < current["recall"]["interval"][1]
    assert (draft["truePositives"], draft["falsePositives"], draft["wrong"]) == (4, 1, 1)
    assert draft["precision"]["value"] == 0.8 and draft["recall"]["value"] == 1.0
    assert (ls["newlyWrong"], ls["noLongerWrong"]) == (1, 1)
    [wrong] = ls["wrong"]
    assert wrong["trace"] == "run-00002" and wrong["traceUrl"].startswith("/traces/")
    assert (wrong["expected"], wrong["now"], wrong["before"], wrong["newly"]) == ("pass", "fail", "pass", True)


def test_the_preview_page_shows_the_labelled_set_beside_the_revision(alice: Any, previewed: Any) -> None:
    body = previewed(STRICTER)
    html = signed_in(alice).get(body["page"]).content.decode()
    assert "On the labelled set" in html and "5 labelled traces" in html
    draft_row = html.split("data-labelled-draft>", 1)[1].split("</tr>", 1)[0]
    assert "1 of 5" in draft_row and "80%" in draft_row and "100%" in draft_row
    current_row = html.split("data-labelled-current>", 1)[1].split("</tr>", 1)[0]
    assert "Revision 1" in current_row and "75%" in current_row
    wrong = html.split("data-labelled-wrong>", 1)[1].split("</table>", 1)[0]
    trace = RunTrace.objects.get(trace_id="run-00002")
    assert f'href="/traces/{trace.pk}/">run-00002</a> <span class="tag">newly wrong</span>' in wrong


def test_a_large_labelled_set_is_cut_and_the_preview_says_so(
    alice: Any, previewed: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(preview_labels, "LABELLED_MAX", 2)
    body = previewed(STRICTER)
    ls = body["labelledSet"]
    assert (ls["total"], ls["evaluated"], ls["capped"], ls["limit"]) == (5, 2, True, 2)
    html = signed_in(alice).get(body["page"]).content.decode()
    assert "The newest 2 of 5 labelled traces" in html


def test_a_new_guardrail_has_no_labelled_set_yet(previewed: Any) -> None:
    ls = previewed(make_guardrail("brand-new"))["labelledSet"]
    assert (ls["total"], ls["evaluated"], ls["current"]) == (0, 0, None)


def test_a_preview_stored_before_labelled_sets_reads_null(api: Any, alice: Any, acme: Any) -> None:
    old = GuardrailPreview.objects.create(tenant=acme, draft=STRICTER, status="succeeded", changes={})
    assert api(alice).get(f"/api/v1/guardrails/previews/{old.pk}").json()["labelledSet"] is None
    assert signed_in(alice).get(f"/guardrails/previews/{old.pk}/").status_code == 200


# --- the export in CI ------------------------------------------------------------------------


def test_guardrail_ci_fails_a_change_that_breaks_an_exported_label(
    api: Any, acme_key: str, labelled: Any, tmp_path: Path
) -> None:
    exported = tmp_path / "no-refunds.labels.jsonl"
    exported.write_bytes(b"".join(api(acme_key).get(URL).streaming_content))
    current, stricter = tmp_path / "current.json", tmp_path / "stricter.json"
    current.write_text(json.dumps(make_guardrail()), encoding="utf-8")
    stricter.write_text(json.dumps(STRICTER), encoding="utf-8")

    def ci(guardrail: Path, labels: Path) -> tuple[int, str]:
        out = io.StringIO()
        status = run_guardrail_ci(["--guardrails", str(guardrail), "--labels", str(labels)], out, io.StringIO())
        return status, out.getvalue()

    status, out = ci(stricter, exported)
    assert status == 1 and "  WRONG run-00002 (" in out and "expected pass, got fail" in out
    assert "precision 0.80 [" in out and "recall 1.00 [" in out
    status, out = ci(current, exported)
    assert status == 1 and "  WRONG run-00001 (" in out and "expected fail, got pass" in out
    right = tmp_path / "right.jsonl"
    right.write_text(
        "".join(line + "\n" for line in exported.read_text().splitlines() if '"id":"run-00001"' not in line),
        encoding="utf-8",
    )
    status, out = ci(current, right)
    assert status == 0 and out.splitlines()[-1].startswith("PASSED") and "labelled set: 4 cases, 0 wrong" in out
