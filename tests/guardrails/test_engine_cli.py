"""validate_guardrail and guardrail_ci: exit statuses and every output format."""

from __future__ import annotations

import gzip
import io
import json
import subprocess
import sys
import threading
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command

from guardrails.engine.cli import run_guardrail_ci, run_validate_guardrail
from guardrails.engine.types import Issue
from tests.guardrails.tracefiles import iter_trace_file

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
EXAMPLE_GUARDRAILS = sorted(str(p) for p in (EXAMPLES / "guardrails").glob("*.json"))
EXAMPLE_TRACES = str(EXAMPLES / "traces.jsonl")


def run(command: Any, *argv: str) -> tuple[int, str, str]:
    stdout, stderr = io.StringIO(), io.StringIO()
    status = command(list(argv), stdout, stderr)
    return status, stdout.getvalue(), stderr.getvalue()


def write(path: Path, doc: object) -> str:
    path.write_text(json.dumps(doc), encoding="utf-8")
    return str(path)


GUARDRAIL = {
    "id": "no-secrets",
    "kind": "zero-llm",
    "check": "forbidden-substring",
    "config": {"values": ["secret"]},
    "action": {"on-violation": "halt"},
    "severity": "critical",
}
RUNTIME_ONLY = {**GUARDRAIL, "id": "runtime-only", "scope": {"when": "runtime-only"}}


def jsonl(path: Path, *traces: object) -> str:
    path.write_text("".join(json.dumps(t) + "\n" for t in traces), encoding="utf-8")
    return str(path)


# --- validate_guardrail --------------------------------------------------------------------


def test_validate_guardrail_accepts_the_examples() -> None:
    status, out, _ = run(run_validate_guardrail, *EXAMPLE_GUARDRAILS)
    assert status == 0
    assert out.count(": ok") == 7


def test_validate_guardrail_names_each_error_with_its_pointer(tmp_path: Path) -> None:
    bad = {**GUARDRAIL, "action": {}, "severity": "fatal"}
    path = write(tmp_path / "g.json", [GUARDRAIL, bad])
    status, out, _ = run(run_validate_guardrail, path)
    assert status == 1
    assert f"{path}[0] (no-secrets): ok" in out
    assert f"{path}[1] (no-secrets): invalid" in out
    assert "  /action/on-violation: 'on-violation' is required" in out
    assert "  /severity: must be one of: info, warn, error, critical" in out


def test_validate_guardrail_prints_warnings(tmp_path: Path) -> None:
    doc = {**GUARDRAIL, "codeArtifactRef": {"kind": "filesystem", "modulePath": "/x.py"}}
    status, out, _ = run(run_validate_guardrail, write(tmp_path / "g.json", doc))
    assert status == 0
    assert "warning /checkBuiltIn:" in out


def test_validate_guardrail_json(tmp_path: Path) -> None:
    path = write(tmp_path / "g.json", [GUARDRAIL, {**GUARDRAIL, "id": "b", "check": "nope"}])
    status, out, _ = run(run_validate_guardrail, path, "--format", "json")
    assert status == 1
    report = json.loads(out)
    assert report["valid"] is False
    assert report["guardrails"][0] == {
        "file": path,
        "index": 0,
        "id": "no-secrets",
        "valid": True,
        "errors": [],
        "warnings": [],
    }
    assert report["guardrails"][1]["errors"] == [{"path": "/check", "message": "no check 'nope' is registered"}]


@pytest.mark.parametrize("content", [None, b"{not json", b""])
def test_validate_guardrail_exits_2_on_an_unreadable_file(tmp_path: Path, content: bytes | None) -> None:
    path = tmp_path / "g.json"
    if content is not None:
        path.write_bytes(content)
    status, _, err = run(run_validate_guardrail, str(path))
    assert status == 2
    assert str(path) in err


def test_validate_guardrail_refuses_a_duplicate_id(tmp_path: Path) -> None:
    path = write(tmp_path / "g.json", [GUARDRAIL, GUARDRAIL])
    status, out, _ = run(run_validate_guardrail, path)
    assert status == 1
    assert "/id: guardrail 'no-secrets' is also defined in" in out


# --- guardrail_ci: exit statuses -------------------------------------------------------------


def test_the_examples_block_the_build() -> None:
    status, out, err = run(run_guardrail_ci, "--guardrails", *EXAMPLE_GUARDRAILS, "--traces", EXAMPLE_TRACES)
    assert status == 1, err
    assert out.splitlines()[-1].startswith("BLOCKED: 7 guardrails x 12 traces: 45 pass, 10 fail")
    assert "FAIL  support-never-deletes-accounts on run-2026-11-29-0007" in out


def test_nothing_blocks_gives_0(tmp_path: Path) -> None:
    g = write(tmp_path / "g.json", [GUARDRAIL, RUNTIME_ONLY])
    t = jsonl(tmp_path / "t.jsonl", {"id": "a", "output": "fine"}, {"id": "b", "output": "ok"})
    status, out, _ = run(run_guardrail_ci, "--guardrails", g, "--traces", t)
    assert status == 0
    assert out.splitlines()[-1].startswith("PASSED: 2 guardrails x 2 traces: 2 pass, 0 fail")


def test_a_runtime_only_guardrail_does_not_block_ci(tmp_path: Path) -> None:
    g = write(tmp_path / "g.json", RUNTIME_ONLY)
    t = jsonl(tmp_path / "t.jsonl", {"id": "a", "output": "a secret"})
    assert run(run_guardrail_ci, "--guardrails", g, "--traces", t)[0] == 0


def test_a_kind_mismatch_is_an_invalid_guardrail(tmp_path: Path) -> None:
    g = write(tmp_path / "g.json", {**GUARDRAIL, "kind": "external"})
    t = jsonl(tmp_path / "t.jsonl", {"id": "a", "output": "fine"})
    status, _, err = run(run_guardrail_ci, "--guardrails", g, "--traces", t)
    assert status == 2  # kind mismatch: the guardrail is invalid
    assert "/kind: check 'forbidden-substring' is of kind 'zero-llm', not 'external'" in err


def test_an_invalid_guardrail_gives_2_with_file_and_pointer(tmp_path: Path) -> None:
    g = write(tmp_path / "g.json", {**GUARDRAIL, "config": {"values": []}})
    t = jsonl(tmp_path / "t.jsonl", {"id": "a"})
    status, out, err = run(run_guardrail_ci, "--guardrails", g, "--traces", t)
    assert status == 2 and out == ""
    assert f"{g} (no-secrets): /config/values: must have at least 1 item" in err


def test_invalid_traces_give_2_with_file_and_line_and_the_rest_still_count(tmp_path: Path) -> None:
    g = write(tmp_path / "g.json", GUARDRAIL)
    t = tmp_path / "t.jsonl"
    t.write_text(
        '{"id": "a", "output": "a secret"}\n\n{"id": "b", "toolcalls": []}\n{broken\n{"id": "c", "output": "fine"}\n',
        encoding="utf-8",
    )
    status, out, err = run(run_guardrail_ci, "--guardrails", g, "--traces", str(t))
    assert status == 2
    assert f"{t}:3: /toolcalls: unknown field 'toolcalls'" in err
    assert f"{t}:4: not valid JSON" in err
    assert "2 traces: 1 pass, 1 fail" in out


def test_an_unreadable_trace_file_gives_2(tmp_path: Path) -> None:
    g = write(tmp_path / "g.json", GUARDRAIL)
    status, _, err = run(run_guardrail_ci, "--guardrails", g, "--traces", str(tmp_path / "none.jsonl"))
    assert status == 2
    assert "none.jsonl: cannot read" in err


def test_bad_arguments_give_2() -> None:
    status, _, err = run(run_guardrail_ci, "--guardrails", "x.json")
    assert status == 2
    assert "--traces" in err


# --- trace files -----------------------------------------------------------------------------


def test_trace_files_in_every_shape(tmp_path: Path) -> None:
    one = write(tmp_path / "one.json", {"id": "a"})
    array = tmp_path / "array.json"
    array.write_text('[\n  {"id": "b"},\n  {"id": "c"}\n]\n', encoding="utf-8")
    packed = tmp_path / "t.jsonl.gz"
    with gzip.open(packed, "wt", encoding="utf-8") as handle:
        handle.write('{"id": "d"}\n\n{"id": "e"}\n')
    assert list(iter_trace_file(one)) == [(1, {"id": "a"})]
    assert list(iter_trace_file(str(array))) == [(2, {"id": "b"}), (3, {"id": "c"})]
    items = [(line, item) for line, item in iter_trace_file(str(packed)) if isinstance(item, dict)]
    assert items == [(1, {"id": "d"}), (3, {"id": "e"})]


def test_a_line_that_is_not_json_is_an_issue(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_text('{"id": "a"}\n[oops\n', encoding="utf-8")
    line, item = list(iter_trace_file(str(path)))[1]
    assert line == 2 and isinstance(item, Issue)


# --- output formats -----------------------------------------------------------------------


def mixed(tmp_path: Path) -> tuple[str, str]:
    g = write(tmp_path / "g.json", [GUARDRAIL, RUNTIME_ONLY])
    t = jsonl(tmp_path / "t.jsonl", {"id": "a", "output": "fine"}, {"id": "b", "output": "my secret"})
    return g, t


def test_json_report(tmp_path: Path) -> None:
    g, t = mixed(tmp_path)
    status, out, _ = run(run_guardrail_ci, "--guardrails", g, "--traces", t, "--format", "json")
    assert status == 1
    report = json.loads(out)
    assert report["passed"] is False
    assert report["summary"] == {"pass": 1, "fail": 1, "error": 0, "skipped": 2}
    assert report["results"][2] == {
        "guardrail": "no-secrets",
        "trace": "b",
        "status": "fail",
        "reason": "output contains forbidden 'secret'",
        "action": "halt",
        "severity": "critical",
        "file": t,
        "line": 2,
    }
    assert [r["status"] for r in report["results"]] == ["pass", "skipped", "fail", "skipped"]


def test_junit_report_parses_back(tmp_path: Path) -> None:
    g, t = mixed(tmp_path)
    output = tmp_path / "report.xml"
    status, out, _ = run(
        run_guardrail_ci, "--guardrails", g, "--traces", t, "--format", "junit", "--output", str(output)
    )
    assert status == 1
    assert f"report written to {output}" in out
    root = ET.parse(output).getroot()
    assert root.tag == "testsuites"
    assert (root.get("tests"), root.get("failures"), root.get("errors"), root.get("skipped")) == ("4", "1", "0", "2")
    suites = {suite.get("name"): suite for suite in root.iter("testsuite")}
    assert set(suites) == {"no-secrets", "runtime-only"}
    cases = suites["no-secrets"].findall("testcase")
    assert [case.get("name") for case in cases] == ["a", "b"]
    assert cases[0].find("failure") is None
    failure = cases[1].find("failure")
    assert failure is not None and failure.get("message") == "output contains forbidden 'secret'"
    assert all(case.find("skipped") is not None for case in suites["runtime-only"].findall("testcase"))


def test_junit_shows_errors_and_bad_input(tmp_path: Path) -> None:
    g = write(tmp_path / "g.json", {**GUARDRAIL, "check": "output-matches", "config": {"pattern": "x"}})
    t = tmp_path / "t.jsonl"
    t.write_text('{"id": "a", "output": "x\\u0001"}\n{"id": 5}\n', encoding="utf-8")
    status, out, _ = run(run_guardrail_ci, "--guardrails", g, "--traces", str(t), "--format", "junit")
    assert status == 2
    root = ET.fromstring(out)
    input_suite = next(s for s in root.iter("testsuite") if s.get("name") == "guardrail_ci input")
    error = input_suite.find("testcase/error")
    assert error is not None and f"{t}:2: /id: must be a string" in (error.get("message") or "")


def test_junit_error_status(tmp_path: Path) -> None:
    from guardrails.engine.cli.batches import Evaluator
    from guardrails.engine.cli.files import iter_entries
    from guardrails.engine.cli.reports import Report
    from guardrails.engine.cli.validate import register_all
    from guardrails.engine.evaluate import Engine
    from guardrails.engine.registry import define_check

    # An external check registered by the caller: its guardrail gives `error` in CI.
    engine = Engine.default()
    engine.registry.register(define_check("acme.ext", "external", config_schema={}, pack="acme"))
    g = {**GUARDRAIL, "kind": "external", "check": "acme.ext", "config": {}}
    loaded = register_all([("g.json", g)], engine)
    guardrails = [entry.registration.guardrail for entry in loaded if entry.registration.guardrail]
    t = jsonl(tmp_path / "t.jsonl", {"id": "a"})
    out = io.StringIO()
    report = Report(guardrails, "junit", out)
    report.add(Evaluator(engine, guardrails, {}, "junit", (1 << 20, 64)).run(t, list(iter_entries(t, 1 << 20))))
    report.finish()
    root = ET.fromstring(out.getvalue())
    error = root.find("testsuite/testcase/error")
    assert error is not None and "evaluated outside the engine" in (error.get("message") or "")
    assert root.get("errors") == "1"


def test_text_report_to_a_file(tmp_path: Path) -> None:
    g, t = mixed(tmp_path)
    output = tmp_path / "report.txt"
    run(run_guardrail_ci, "--guardrails", g, "--traces", t, "--output", str(output))
    text = output.read_text(encoding="utf-8")
    assert "FAIL  no-secrets on b" in text and text.splitlines()[-1].startswith("BLOCKED")


# --- --console -----------------------------------------------------------------------------


@pytest.fixture
def console() -> Iterator[tuple[str, list[dict[str, str]]]]:
    """A tiny console serving an export at /api/v1/guardrails/export."""
    seen: list[dict[str, str]] = []

    class Export(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            seen.append({"path": self.path, "auth": self.headers.get("Authorization", "")})
            if self.headers.get("Authorization") != "Bearer kg_test_key":
                self.send_response(401)
                self.end_headers()
                return
            body = json.dumps([GUARDRAIL]).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = HTTPServer(("127.0.0.1", 0), Export)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}", seen
    server.shutdown()
    server.server_close()


def test_console_export_is_downloaded_with_the_api_key(
    tmp_path: Path, console: tuple[str, list[dict[str, str]]], monkeypatch: pytest.MonkeyPatch
) -> None:
    url, seen = console
    monkeypatch.setenv("KINDGI_API_KEY", "kg_test_key")
    t = jsonl(tmp_path / "t.jsonl", {"id": "a", "output": "a secret"})
    status, out, _ = run(run_guardrail_ci, "--console", url + "/", "--traces", t)
    assert status == 1
    assert seen == [{"path": "/api/v1/guardrails/export", "auth": "Bearer kg_test_key"}]
    assert "FAIL  no-secrets on a" in out


def test_console_refusing_the_key_gives_2(
    tmp_path: Path, console: tuple[str, list[dict[str, str]]], monkeypatch: pytest.MonkeyPatch
) -> None:
    url, _ = console
    monkeypatch.setenv("KINDGI_API_KEY", "wrong")
    t = jsonl(tmp_path / "t.jsonl", {"id": "a"})
    status, _, err = run(run_guardrail_ci, "--console", url, "--traces", t)
    assert status == 2 and "the console answered 401" in err
    monkeypatch.delenv("KINDGI_API_KEY")
    status, _, err = run(run_guardrail_ci, "--console", url, "--traces", t)
    assert status == 2 and "KINDGI_API_KEY" in err


# --- manage.py and call_command -----------------------------------------------------------


def test_manage_py_runs_the_ci_commands_without_django(tmp_path: Path) -> None:
    probe = (
        "import runpy, sys\n"
        "sys.argv = ['manage.py'] + sys.argv[1:]\n"
        "def report():\n"
        "    print('django' if 'django' in sys.modules else 'no django', file=sys.stderr, flush=True)\n"
        "try:\n    runpy.run_path('manage.py', run_name='__main__')\n"
        "finally:\n"
        "    report()\n"
    )
    completed = subprocess.run(
        [
            sys.executable,
            "-c",
            probe,
            "guardrail_ci",
            "--guardrails",
            *EXAMPLE_GUARDRAILS,
            "--traces",
            EXAMPLE_TRACES,
            "--format",
            "junit",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert completed.returncode == 1
    assert completed.stderr.strip().endswith("no django")
    ET.fromstring(completed.stdout)


def test_manage_py_writes_the_whole_report_and_the_bad_input_before_it_exits(tmp_path: Path) -> None:
    # All the command wrote is out when manage.py's path without Django exits, through a
    # pipe as into a file.
    first = json.loads(Path(EXAMPLE_TRACES).read_text(encoding="utf-8").splitlines()[0])
    traces = tmp_path / "many.jsonl"
    lines = [json.dumps({**first, "id": f"run-{number}"}) for number in range(3000)]
    traces.write_text("\n".join([*lines, "{not json"]) + "\n", encoding="utf-8")
    command = [sys.executable, "manage.py", "guardrail_ci", "--guardrails", *EXAMPLE_GUARDRAILS]
    completed = subprocess.run(
        [*command, "--traces", str(traces), "--format", "json"], cwd=ROOT, capture_output=True, check=False
    )
    assert completed.returncode == 2
    report = json.loads(completed.stdout)
    assert len(report["results"]) == 3000 * len(EXAMPLE_GUARDRAILS)
    message = completed.stderr.decode()
    assert message.startswith(f"{traces}:3001: not valid JSON (") and message.endswith(" at column 2)\n")

    written = tmp_path / "report.json"
    completed = subprocess.run(
        [*command, "--traces", EXAMPLE_TRACES, "--format", "json", "--output", str(written)],
        cwd=ROOT,
        capture_output=True,
        check=False,
    )
    summary = json.loads(written.read_text(encoding="utf-8"))["summary"]
    assert completed.returncode == (1 if summary["fail"] + summary["error"] else 0)
    assert b"report written to" in completed.stdout


def test_call_command_reaches_the_same_commands(tmp_path: Path) -> None:
    stdout = io.StringIO()
    call_command("validate_guardrail", *EXAMPLE_GUARDRAILS, stdout=stdout)
    assert stdout.getvalue().count(": ok") == 7
    with pytest.raises(SystemExit) as exit_info:
        call_command(
            "guardrail_ci",
            "--guardrails",
            *EXAMPLE_GUARDRAILS,
            "--traces",
            EXAMPLE_TRACES,
            "--format",
            "json",
            stdout=(out := io.StringIO()),
        )
    assert exit_info.value.code == 1
    assert json.loads(out.getvalue())["summary"]["fail"] == 10
