"""guardrail_ci --labels: a labelled set blocks a guardrail change that breaks a labelled case,
reports precision and recall on it in every format, names a bad record's line and field, and
is read as a stream; a run without it reports as before."""

from __future__ import annotations

import json
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from guardrails.engine.cli import run_guardrail_ci
from guardrails.engine.cli.labels import MAX_KEPT
from guardrails.engine.labelled import Confusion, is_wrong, record_issues
from guardrails.engine.statistics import wilson
from tests.guardrails.test_engine_cli import GUARDRAIL, ROOT, jsonl, run, write

#: no-secrets gets t1 and t3 right, misses t2 (a false negative) and fails t4 (a false positive).
CASES = [
    {"guardrail": "no-secrets", "expected": "fail", "trace": {"id": "t1", "output": "a secret"}, "labelledBy": "bob"},
    {"guardrail": "no-secrets", "expected": "fail", "trace": {"id": "t2", "output": "my password"}},
    {"guardrail": "no-secrets", "expected": "pass", "trace": {"id": "t3", "output": "fine"}},
    {"guardrail": "no-secrets", "expected": "pass", "trace": {"id": "t4", "output": "secret santa"}},
    {"guardrail": "someone-else", "expected": "pass", "trace": {"id": "t5", "output": "fine"}},
]
RIGHT = [CASES[0], CASES[2], CASES[4]]


@pytest.fixture
def guardrails(tmp_path: Path) -> str:
    return write(tmp_path / "g.json", [GUARDRAIL])


def labels(tmp_path: Path, *cases: object, name: str = "labels.jsonl") -> str:
    return jsonl(tmp_path / name, *cases)


# --- the engine's rules ------------------------------------------------------------------------


def test_a_verdict_is_wrong_when_it_is_not_the_label() -> None:
    assert not is_wrong("fail", "fail") and not is_wrong("pass", "pass") and not is_wrong("pass", "skipped")
    assert is_wrong("fail", "pass") and is_wrong("fail", "skipped") and is_wrong("pass", "fail")
    assert is_wrong("pass", "error") and is_wrong("fail", "error")


def test_precision_and_recall_leave_errors_out_and_carry_wilson_intervals() -> None:
    confusion = Confusion()
    for expected, status in [("fail", "fail")] * 3 + [("pass", "fail"), ("fail", "pass"), ("pass", "error")]:
        confusion.add(expected, status)
    assert (confusion.labelled, confusion.wrong, confusion.errors) == (6, 3, 1)
    low, high = wilson(3, 4) or (0.0, 0.0)
    assert confusion.precision() == {"value": 0.75, "interval": [round(low, 4), round(high, 4)]}
    assert confusion.recall()["value"] == 0.75
    assert Confusion().precision() == {"value": None, "interval": None}


@pytest.mark.parametrize(
    ("record", "path"),
    [
        ([], ""),
        ({"expected": "pass", "trace": {"id": "a"}}, "/guardrail"),
        ({"guardrail": "", "expected": "pass", "trace": {"id": "a"}}, "/guardrail"),
        ({"guardrail": "g", "trace": {"id": "a"}}, "/expected"),
        ({"guardrail": "g", "expected": "maybe", "trace": {"id": "a"}}, "/expected"),
        ({"guardrail": "g", "expected": "fail", "trace": "a"}, "/trace"),
        ({"guardrail": "g", "expected": "fail", "trace": {"id": "a", "messages": 3}}, "/trace/messages"),
    ],
)
def test_a_bad_record_is_named_by_its_field(record: object, path: str) -> None:
    assert record_issues(record)[0].path == path


# --- blocking -------------------------------------------------------------------------------------


def test_a_wrong_labelled_case_blocks_and_is_listed(tmp_path: Path, guardrails: str) -> None:
    file = labels(tmp_path, *CASES)
    status, out, err = run(run_guardrail_ci, "--guardrails", guardrails, "--labels", file)
    assert status == 1, err
    assert out.splitlines() == [
        f"LABELS no-secrets: 4 cases, 2 wrong; precision 0.50 [0.09, 0.91], recall 0.50 [0.09, 0.91] (in {file})",
        f"  WRONG t2 ({file}:2): expected fail, got pass",
        f"  WRONG t4 ({file}:4): expected pass, got fail: output contains forbidden 'secret'",
        "LABELS 1 cases of guardrails not in this run, not evaluated: someone-else",
        out.splitlines()[-1],
    ]
    assert out.splitlines()[-1].startswith(
        "BLOCKED: 1 guardrails x 0 traces: 0 pass, 0 fail, 0 error, 0 skipped; labelled set: 4 cases, 2 wrong ("
    )


def test_labels_right_pass_beside_traces_that_pass(tmp_path: Path, guardrails: str) -> None:
    traces = jsonl(tmp_path / "t.jsonl", {"id": "x", "output": "fine"})
    status, out, _ = run(
        run_guardrail_ci, "--guardrails", guardrails, "--traces", traces, "--labels", labels(tmp_path, *RIGHT)
    )
    assert status == 0
    assert out.splitlines()[-1].startswith(
        "PASSED: 1 guardrails x 1 traces: 1 pass, 0 fail, 0 error, 0 skipped; labelled set: 2 cases, 0 wrong"
    )


def test_a_labelled_case_blocks_whatever_block_on_says(tmp_path: Path, guardrails: str) -> None:
    argv = ["--guardrails", guardrails, "--labels", labels(tmp_path, CASES[1]), "--block-on", "log-only"]
    assert run(run_guardrail_ci, *argv)[0] == 1


def test_labels_of_an_llm_judge_without_judges_are_errors_and_wrong(tmp_path: Path) -> None:
    judge = {
        "id": "polite",
        "kind": "llm-judge",
        "check": "rubric",
        "config": {"criteria": "The agent is polite."},
        "action": {"on-violation": "log-only"},
    }
    g = write(tmp_path / "j.json", [judge])
    file = labels(tmp_path, {"guardrail": "polite", "expected": "pass", "trace": {"id": "a", "output": "hi"}})
    status, out, _ = run(run_guardrail_ci, "--guardrails", g, "--labels", file)
    assert status == 1 and "  WRONG a (" in out and "expected pass, got error" in out


def test_neither_traces_nor_labels_is_a_usage_error(guardrails: str) -> None:
    status, _, err = run(run_guardrail_ci, "--guardrails", guardrails)
    assert status == 2 and "give --traces PATH... or --labels FILE..." in err


# --- bad input ------------------------------------------------------------------------------------


def test_a_bad_labelled_set_is_bad_input_naming_the_line_and_the_field(tmp_path: Path, guardrails: str) -> None:
    file = tmp_path / "bad.jsonl"
    file.write_text(
        json.dumps(CASES[0])
        + "\n"
        + json.dumps({**CASES[2], "expected": "maybe"})
        + "\n"
        + json.dumps({**CASES[2], "trace": {"id": "t9", "messages": 3}})
        + "\nnot json\n"
        + json.dumps({"expected": "pass", "trace": {"id": "z"}})
        + "\n",
        encoding="utf-8",
    )
    status, out, err = run(
        run_guardrail_ci, "--guardrails", guardrails, "--labels", str(file), str(tmp_path / "none.jsonl")
    )
    assert status == 2
    assert out.splitlines()[-1].startswith("BAD INPUT: 1 guardrails x 0 traces")
    assert f"{file}:2: /expected: must be pass or fail" in err
    assert f"{file}:3: /trace/messages: must be an array" in err
    assert f"{file}:4: not valid JSON" in err
    assert f"{file}:5: /guardrail: is required" in err
    assert "none.jsonl: cannot read" in err
    assert "LABELS no-secrets: 1 cases, 0 wrong" in out  # the good record still counted


# --- every format ---------------------------------------------------------------------------------


def test_json_report_has_the_figures_and_the_wrong_cases(tmp_path: Path, guardrails: str) -> None:
    file = labels(tmp_path, *CASES)
    status, out, _ = run(run_guardrail_ci, "--guardrails", guardrails, "--labels", file, "--format", "json")
    assert status == 1
    report = json.loads(out)
    assert report["passed"] is False
    sets = report["labels"]
    assert (sets["files"], sets["cases"], sets["wrong"]) == ([file], 4, 2)
    assert sets["notInRun"] == {"cases": 1, "guardrails": ["someone-else"]}
    [figures] = sets["guardrails"]
    assert figures["guardrail"] == "no-secrets"
    assert (figures["truePositives"], figures["falsePositives"], figures["falseNegatives"]) == (1, 1, 1)
    assert figures["precision"]["value"] == 0.5 and len(figures["recall"]["interval"]) == 2
    assert [(w["trace"], w["line"], w["expected"], w["status"]) for w in figures["wrongCases"]] == [
        ("t2", 2, "fail", "pass"),
        ("t4", 4, "pass", "fail"),
    ]
    assert figures["moreWrong"] == 0


def test_junit_has_a_testsuite_of_labelled_cases(tmp_path: Path, guardrails: str) -> None:
    file = labels(tmp_path, *CASES)
    _, out, _ = run(run_guardrail_ci, "--guardrails", guardrails, "--labels", file, "--format", "junit")
    root = ET.fromstring(out)
    assert (root.get("tests"), root.get("failures")) == ("4", "2")
    suite = next(s for s in root.iter("testsuite") if s.get("name") == "labels: no-secrets")
    assert (suite.get("tests"), suite.get("failures")) == ("4", "2")
    properties = {p.get("name"): p.get("value") for p in suite.iter("property")}
    assert properties == {"precision": "0.50 [0.09, 0.91]", "recall": "0.50 [0.09, 0.91]"}
    cases = suite.findall("testcase")
    assert [c.get("name") for c in cases] == ["t1", "t2", "t3", "t4"]
    failure = cases[1].find("failure")
    assert failure is not None and failure.get("message") == "expected fail, got pass"
    assert failure.get("type") == "labelled-case-wrong"


def test_markdown_and_annotations_show_the_labelled_set(tmp_path: Path, guardrails: str) -> None:
    file = labels(tmp_path, *CASES)
    argv = ["--guardrails", guardrails, "--labels", file, "--format", "markdown", "--annotations"]
    _, out, _ = run(run_guardrail_ci, *argv)
    assert f"### Labelled set (`{file}`)" in out
    assert "| `no-secrets` | 4 | 2 | 0.50 [0.09, 0.91] | 0.50 [0.09, 0.91] |" in out
    assert "#### `no-secrets`: 2 wrong" in out
    assert f"- `t2` (`{file}:2`) expected fail, got pass" in out
    assert "1 cases of guardrails not in this run, not evaluated: someone-else" in out
    assert f"::error file={file},line=4,title=no-secrets%3A labelled case t4 wrong::expected pass, got fail" in out


def test_the_wrong_cases_kept_are_bounded_and_the_rest_counted(tmp_path: Path, guardrails: str) -> None:
    many = [
        {"guardrail": "no-secrets", "expected": "pass", "trace": {"id": f"s{n}", "output": "secret"}}
        for n in range(MAX_KEPT + 5)
    ]
    _, out, _ = run(
        run_guardrail_ci, "--guardrails", guardrails, "--labels", labels(tmp_path, *many), "--format", "json"
    )
    [figures] = json.loads(out)["labels"]["guardrails"]
    assert len(figures["wrongCases"]) == MAX_KEPT and figures["moreWrong"] == 5 and figures["wrong"] == MAX_KEPT + 5


def test_without_labels_the_reports_are_as_before(tmp_path: Path, guardrails: str) -> None:
    traces = jsonl(tmp_path / "t.jsonl", {"id": "x", "output": "a secret"})
    _, out, _ = run(run_guardrail_ci, "--guardrails", guardrails, "--traces", traces, "--format", "json")
    assert set(json.loads(out)) == {"results", "errors", "summary", "passed"}
    _, out, _ = run(run_guardrail_ci, "--guardrails", guardrails, "--traces", traces)
    assert "labelled set" not in out and "LABELS" not in out


# --- streaming and start-up ---------------------------------------------------------------------


def test_the_set_is_read_a_record_at_a_time(tmp_path: Path, guardrails: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # The trace files' streaming reader hands over one record, which is evaluated before the
    # next is read: nothing holds the file whole.
    from guardrails.engine.cli import files
    from guardrails.engine.cli import labels as labels_module

    events: list[str] = []
    reader, add = files.raw_entries, labels_module.LabelledSets.add  # type: ignore[attr-defined]

    def reading(*args: Any, **kwargs: Any) -> Iterator[Any]:
        for entry in reader(*args, **kwargs):
            events.append(f"read {entry[0]}")
            yield entry

    def adding(self: Any, index: int, case: Any) -> None:
        events.append(f"evaluated {case[2]}")
        add(self, index, case)

    monkeypatch.setattr(files, "raw_entries", reading)
    monkeypatch.setattr(labels_module.LabelledSets, "add", adding)
    status, _, _ = run(run_guardrail_ci, "--guardrails", guardrails, "--labels", labels(tmp_path, *CASES))
    assert status == 1
    assert events == [*(f"{what} {n}" for n in range(1, 5) for what in ("read", "evaluated")), "read 5"]


def test_a_plain_run_does_not_import_the_labelled_sets(tmp_path: Path, guardrails: str) -> None:
    traces = jsonl(tmp_path / "t.jsonl", {"id": "x", "output": "fine"})
    probe = (
        "import sys\n"
        "from guardrails.engine.cli import run_guardrail_ci\n"
        "run_guardrail_ci(sys.argv[1:], sys.stdout, sys.stderr)\n"
        "print(sorted(m for m in sys.modules if m.endswith(('.labels', '.labelled', '.statistics'))))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe, "--guardrails", guardrails, "--traces", traces],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.stdout.splitlines()[-1] == "[]", done.stderr
