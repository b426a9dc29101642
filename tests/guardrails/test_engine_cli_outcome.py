"""guardrail_ci's conclusions: BAD INPUT on exit 2, `--block-on`, `--fail-on`, `--baseline` in
every format, the markdown summary and GitHub's annotations; and the first invalid trace's
explanation without rfc3987_syntax's import."""

from __future__ import annotations

import json
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from guardrails.engine.cli import run_guardrail_ci
from tests.guardrails.test_engine_cli import (  # noqa: F401  (console: a fixture)
    EXAMPLE_GUARDRAILS,
    EXAMPLE_TRACES,
    GUARDRAIL,
    ROOT,
    console,
    jsonl,
    run,
    write,
)

LOG_ONLY = {
    **GUARDRAIL,
    "id": "no-passwords",
    "config": {"values": ["password"]},
    "action": {"on-violation": "log-only"},
}


def traces(tmp_path: Path, name: str, *outputs: str) -> str:
    return jsonl(tmp_path / name, *({"id": f"t{i}", "output": text} for i, text in enumerate(outputs, start=1)))


def baseline_of(tmp_path: Path, guardrails: str, trace_file: str) -> str:
    """The JSON report of a run, as the base branch would have saved it."""
    status, out, err = run(run_guardrail_ci, "--guardrails", guardrails, "--traces", trace_file, "--format", "json")
    assert status in (0, 1), err
    path = tmp_path / "baseline.json"
    path.write_text(out, encoding="utf-8")
    return str(path)


@pytest.fixture
def compared(tmp_path: Path) -> tuple[str, str, str]:
    """Guardrails, traces and a baseline: t1 failed before and still fails, t2 failed and is
    fixed, t3 fails newly."""
    g = write(tmp_path / "g.json", [GUARDRAIL])
    before = traces(tmp_path, "before.jsonl", "a secret", "the secret", "fine")
    after = traces(tmp_path, "after.jsonl", "a secret", "fine", "one more secret")
    return g, after, baseline_of(tmp_path, g, before)


# --- bad input ------------------------------------------------------------------------------


def test_a_missing_trace_file_is_bad_input_never_passed(tmp_path: Path) -> None:
    g = write(tmp_path / "g.json", [GUARDRAIL])
    status, out, err = run(run_guardrail_ci, "--guardrails", g, "--traces", str(tmp_path / "missing.jsonl"))
    assert status == 2
    assert out.startswith("BAD INPUT: 1 guardrails x 0 traces")
    assert "PASSED" not in out
    assert "missing.jsonl: cannot read" in err


def test_an_invalid_trace_is_bad_input_in_the_summary_line_too(tmp_path: Path) -> None:
    g = write(tmp_path / "g.json", [GUARDRAIL])
    t = jsonl(tmp_path / "t.jsonl", {"id": "a", "output": "fine"}, {"id": "b", "messages": 3})
    status, out, err = run(run_guardrail_ci, "--guardrails", g, "--traces", t, "--output", str(tmp_path / "r.txt"))
    assert status == 2
    assert out.startswith("BAD INPUT: 1 guardrails x 1 traces: 1 pass")
    assert (tmp_path / "r.txt").read_text(encoding="utf-8").startswith("BAD INPUT")
    assert "/messages: must be an array" in err


def test_the_first_invalid_trace_is_explained_without_importing_rfc3987_syntax(tmp_path: Path) -> None:
    # A stand-in rfc3987_syntax on the path: jsonschema's import would load it (the real one
    # builds a Lark grammar, seconds); the explanation of an invalid trace must not.
    fake = tmp_path / "site"
    fake.mkdir()
    (fake / "rfc3987_syntax.py").write_text(
        "import sys\nsys.stderr.write('rfc3987_syntax imported\\n')\n"
        "def is_valid_syntax(rule, value):\n    return ' ' not in value\n",
        encoding="utf-8",
    )
    t = jsonl(tmp_path / "t.jsonl", {"id": "b", "startedAt": "yesterday"})
    probe = (
        "import sys\n"
        "from guardrails.engine.cli import run_guardrail_ci\n"
        "status = run_guardrail_ci(sys.argv[1:], sys.stdout, sys.stderr)\n"
        "print('loaded' if 'rfc3987_syntax' in sys.modules else 'not loaded')\n"
        "from guardrails.engine.schema import validate_against\n"
        "schema = {'type': 'string', 'format': 'iri'}\n"
        "print(validate_against(schema, 'not an iri')[0].message)\n"
        "print(validate_against(schema, 'https://example.com/ok'))\n"
    )
    env = {"PYTHONPATH": f"{ROOT}:{fake}", "PATH": "/usr/bin:/bin"}
    completed = subprocess.run(
        [sys.executable, "-c", probe, "--guardrails", *EXAMPLE_GUARDRAILS, "--traces", t],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    lines = completed.stdout.splitlines()
    assert "/startedAt: must be an RFC 3339 date-time" in completed.stderr
    assert lines[1] == "not loaded", completed.stderr
    # ... and a format that needs it imports it then, and checks with it.
    assert lines[2] == "must be a valid iri", lines
    assert lines[3] == "[]"
    assert completed.stderr.count("rfc3987_syntax imported") == 1


# --- what blocks ----------------------------------------------------------------------------


def test_every_action_blocks_by_default_as_the_contract_says(tmp_path: Path) -> None:
    g = write(tmp_path / "g.json", [LOG_ONLY])
    t = traces(tmp_path, "t.jsonl", "my password")
    status, out, _ = run(run_guardrail_ci, "--guardrails", g, "--traces", t)
    assert status == 1
    assert out.splitlines()[-1].startswith("BLOCKED")


def test_block_on_lets_the_other_actions_through(tmp_path: Path) -> None:
    g = write(tmp_path / "g.json", [GUARDRAIL, LOG_ONLY])
    t = traces(tmp_path, "t.jsonl", "my password")
    status, out, _ = run(run_guardrail_ci, "--guardrails", g, "--traces", t, "--block-on", "halt")
    assert status == 0
    assert "FAIL  no-passwords on t1" in out  # still reported
    assert out.splitlines()[-1].startswith("PASSED: 2 guardrails x 1 traces: 1 pass, 1 fail")
    t2 = traces(tmp_path, "t2.jsonl", "my secret")
    assert run(run_guardrail_ci, "--guardrails", g, "--traces", t2, "--block-on", "halt")[0] == 1
    assert run(run_guardrail_ci, "--guardrails", g, "--traces", t, "--block-on", "halt,log-only")[0] == 1


@pytest.mark.parametrize("value", ["", "halt,", ",,"])
def test_a_bad_block_on_is_a_usage_error(tmp_path: Path, value: str) -> None:
    status, _, err = run(run_guardrail_ci, "--traces", "t.jsonl", "--block-on", value)
    assert status == 2 and "--block-on" in err


def test_fail_on_new_needs_a_baseline(tmp_path: Path) -> None:
    g = write(tmp_path / "g.json", [GUARDRAIL])
    status, _, err = run(run_guardrail_ci, "--guardrails", g, "--traces", "t.jsonl", "--fail-on", "new")
    assert status == 2 and "--fail-on new needs --baseline" in err


# --- against a baseline ------------------------------------------------------------------------


def test_text_report_lists_newly_and_no_longer_failing(compared: tuple[str, str, str]) -> None:
    g, t, base = compared
    status, out, _ = run(run_guardrail_ci, "--guardrails", g, "--traces", t, "--baseline", base)
    assert status == 1
    assert f"BASELINE no-secrets: 1 newly failing, 1 no longer failing (against {base})\n" in out
    assert "  NEW   t3 (" in out and "  FIXED t2\n" in out
    assert out.splitlines()[-1].startswith(
        "BLOCKED: 1 guardrails x 3 traces: 1 pass, 2 fail, 0 error, 0 skipped; "
        "against the baseline: 1 newly failing, 1 no longer failing"
    )


def test_fail_on_new_blocks_only_on_a_regression(tmp_path: Path, compared: tuple[str, str, str]) -> None:
    g, t, base = compared
    assert run(run_guardrail_ci, "--guardrails", g, "--traces", t, "--baseline", base, "--fail-on", "new")[0] == 1
    same = traces(tmp_path, "same.jsonl", "a secret", "fine")  # t1 fails as before
    status, out, _ = run(run_guardrail_ci, "--guardrails", g, "--traces", same, "--baseline", base, "--fail-on", "new")
    assert status == 0
    assert out.splitlines()[-1].startswith("PASSED: 1 guardrails x 2 traces: 1 pass, 1 fail")


def test_json_report_has_the_comparison(compared: tuple[str, str, str]) -> None:
    g, t, base = compared
    status, out, _ = run(run_guardrail_ci, "--guardrails", g, "--traces", t, "--baseline", base, "--format", "json")
    assert status == 1
    assert json.loads(out)["baseline"] == {
        "report": base,
        "guardrails": [
            {
                "guardrail": "no-secrets",
                "newlyFailing": 1,
                "noLongerFailing": 1,
                "newlyFailingTraces": ["t3"],
                "noLongerFailingTraces": ["t2"],
            }
        ],
    }


def test_junit_report_has_the_comparison_as_properties(compared: tuple[str, str, str]) -> None:
    g, t, base = compared
    _, out, _ = run(run_guardrail_ci, "--guardrails", g, "--traces", t, "--baseline", base, "--format", "junit")
    suite = ET.fromstring(out).find("testsuite")
    assert suite is not None
    properties = {p.get("name"): p.get("value") for p in suite.iter("property")}
    assert properties == {"newly-failing": "1", "no-longer-failing": "1"}
    assert len(suite.findall("testcase")) == 3


def test_without_a_baseline_the_reports_are_as_before(tmp_path: Path) -> None:
    g = write(tmp_path / "g.json", [GUARDRAIL])
    t = traces(tmp_path, "t.jsonl", "a secret")
    _, out, _ = run(run_guardrail_ci, "--guardrails", g, "--traces", t, "--format", "json")
    assert set(json.loads(out)) == {"results", "errors", "summary", "passed"}
    _, out, _ = run(run_guardrail_ci, "--guardrails", g, "--traces", t, "--format", "junit")
    assert "<properties>" not in out


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"{not json", "not valid JSON"),
        (b'{"summary": {}}', "/results: a baseline is a JSON report"),
        (b'{"results": [{"guardrail": "g", "trace": 3, "status": "fail"}]}', "/results/0/trace: must be a string"),
    ],
)
def test_a_bad_baseline_is_bad_input_naming_the_field(tmp_path: Path, content: bytes, message: str) -> None:
    g = write(tmp_path / "g.json", [GUARDRAIL])
    t = traces(tmp_path, "t.jsonl", "fine")
    (tmp_path / "b.json").write_bytes(content)
    status, _, err = run(run_guardrail_ci, "--guardrails", g, "--traces", t, "--baseline", str(tmp_path / "b.json"))
    assert status == 2 and message in err


# --- markdown and annotations ------------------------------------------------------------------


def test_markdown_summary_of_the_examples() -> None:
    status, out, _ = run(
        run_guardrail_ci, "--guardrails", *EXAMPLE_GUARDRAILS, "--traces", EXAMPLE_TRACES, "--format", "markdown"
    )
    assert status == 1
    assert out.startswith("## Guardrails: BLOCKED\n\nBLOCKED: 7 guardrails x 12 traces")
    assert "| guardrail | on violation | blocks | pass | fail | error | skipped |" in out
    assert "| `refund-answers-cite-policy` | log-only | yes | 3 | 3 | 0 | 6 |" in out
    assert "#### `refund-answers-cite-policy`: 3 failing" in out
    assert (
        "- `run-2026-11-29-0007` (`examples/traces.jsonl:7`) **fail**: called forbidden tool 'delete\\_account'"
    ) in out.replace(str(ROOT) + "/", "")


def test_markdown_against_a_baseline(compared: tuple[str, str, str]) -> None:
    g, t, base = compared
    argv = ["--guardrails", g, "--traces", t, "--baseline", base, "--format", "markdown", "--block-on", "halt"]
    status, out, _ = run(run_guardrail_ci, *argv)
    assert status == 1
    assert "| `no-secrets` | halt | yes | 1 | 2 | 0 | 0 | 1 | 1 |" in out
    newly = out.split("### Newly failing", 1)[1].split("###", 1)[0]
    assert "`t3`" in newly and "`t1`" not in newly
    assert "### No longer failing\n\n- `no-secrets` on `t2`" in out


def test_markdown_links_to_the_console_pages(
    tmp_path: Path, console: tuple[str, list[dict[str, str]]], monkeypatch: pytest.MonkeyPatch
) -> None:
    url, _ = console
    monkeypatch.setenv("KINDGI_API_KEY", "kg_test_key")
    t = traces(tmp_path, "t.jsonl", "a secret")
    _, out, _ = run(run_guardrail_ci, "--console", url, "--traces", t, "--format", "markdown")
    assert f"| [`no-secrets`]({url}/guardrails/no-secrets/) | halt | yes | 0 | 1 |" in out


def test_markdown_escapes_what_a_trace_wrote(tmp_path: Path) -> None:
    g = write(tmp_path / "g.json", [{**GUARDRAIL, "config": {"values": ["<b>|"]}}])
    t = jsonl(tmp_path / "t.jsonl", {"id": "a|`<x>`", "output": "<b>| injected"})
    _, out, _ = run(run_guardrail_ci, "--guardrails", g, "--traces", t, "--format", "markdown")
    line = next(line for line in out.splitlines() if line.startswith("- `a"))
    assert line.startswith("- `a\\|'<x>'` (")
    assert "<b>" not in line and "&lt;b&gt;\\|" in line


def test_summary_file_is_appended_and_the_report_stays_junit(tmp_path: Path) -> None:
    summary = tmp_path / "summary.md"
    summary.write_text("# before\n", encoding="utf-8")
    report = tmp_path / "r.xml"
    status, _, _ = run(
        run_guardrail_ci,
        "--guardrails",
        *EXAMPLE_GUARDRAILS,
        "--traces",
        EXAMPLE_TRACES,
        "--format",
        "junit",
        "--output",
        str(report),
        "--summary",
        str(summary),
    )
    assert status == 1
    ET.parse(report)
    text = summary.read_text(encoding="utf-8")
    assert text.startswith("# before\n## Guardrails: ")


def test_annotations_are_github_workflow_commands(compared: tuple[str, str, str]) -> None:
    g, t, base = compared
    _, out, _ = run(
        run_guardrail_ci, "--guardrails", g, "--traces", t, "--baseline", base, "--annotations", "--output", "/dev/null"
    )
    errors = [line for line in out.splitlines() if line.startswith("::")]
    assert errors == [f"::error file={t},line=3,title=no-secrets%3A fail on t3::output contains forbidden 'secret'"]
