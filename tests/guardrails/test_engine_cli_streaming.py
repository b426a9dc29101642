"""guardrail_ci over many traces: --jobs, streamed reports, plans, and what it imports."""

from __future__ import annotations

import gzip
import io
import json
import os
import re
import subprocess
import sys
import traceback
import xml.etree.ElementTree as ET
import zlib
from pathlib import Path
from typing import Any

import pytest

from guardrails.engine.cli import batches as cli_batches
from guardrails.engine.cli import run_guardrail_ci
from guardrails.engine.cli.batches import batches
from guardrails.engine.cli.files import BadInput, iter_entries
from guardrails.engine.cli.reports import Batch, Report
from guardrails.engine.evaluate import Engine
from guardrails.engine.registration import define_guardrail
from guardrails.engine.registry import define_check
from guardrails.engine.types import Context, Guardrail, failed

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE_GUARDRAILS = sorted(str(p) for p in (ROOT / "examples" / "guardrails").glob("*.json"))
EXAMPLE_LINES = (ROOT / "examples" / "traces.jsonl").read_text(encoding="utf-8").splitlines()


def run(*argv: str) -> tuple[int, str, str]:
    stdout, stderr = io.StringIO(), io.StringIO()
    status = run_guardrail_ci(list(argv), stdout, stderr)
    return status, stdout.getvalue(), stderr.getvalue()


#: Traces per batch in these tests (--jobs sends batches of up to 1,000): several batches
#: a file at a tenth of the cost.
BATCH_SIZE = 100


@pytest.fixture
def many(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Trace files of several batches: JSON Lines with bad lines, gzip, and a JSON array."""
    monkeypatch.setattr(cli_batches, "BATCH_SIZE", BATCH_SIZE)
    lines = []
    for number in range(3 * BATCH_SIZE + 17):
        trace = json.loads(EXAMPLE_LINES[number % len(EXAMPLE_LINES)])
        trace["id"] = f"t-{number}"
        lines.append(json.dumps(trace))
    lines[5] = "[not json"
    lines[BATCH_SIZE + 1] = '{"id": 5}'
    lines[2 * BATCH_SIZE] = ""
    plain = tmp_path / "a.jsonl"
    plain.write_text("\n".join(lines) + "\n", encoding="utf-8")
    packed = tmp_path / "b.jsonl.gz"
    with gzip.open(packed, "wt", encoding="utf-8") as handle:
        handle.write("\n".join(lines[: BATCH_SIZE + 3]) + "\n")
    array = tmp_path / "c.json"
    elements = [line for line in lines[10:250] if line]  # (a blank one would break the array)
    array.write_text("[\n" + ",\n".join(elements) + "\n]\n", encoding="utf-8")
    return [str(plain), str(packed), str(array)]


@pytest.mark.parametrize("fmt", ["text", "json", "junit"])
def test_jobs_give_the_same_report_in_the_same_order(many: list[str], fmt: str) -> None:
    common = ["--guardrails", *EXAMPLE_GUARDRAILS, "--traces", *many, "--format", fmt]
    alone = run(*common)
    shared = run(*common, "--jobs", "2")
    assert alone[0] == shared[0] == 2  # the bad lines are bad input
    assert alone[2] == shared[2] and f"{many[0]}:6: not valid JSON" in alone[2]
    # The text summary says how long the run took: the rest is the same, byte for byte.
    assert _without_times(alone[1]) == _without_times(shared[1])


def test_a_batch_closes_at_its_count_or_once_it_holds_its_bytes() -> None:
    """Its bytes weighed every `step` traces (2 here); a refused line (None) has none."""
    sizes: list[int | None] = [10, None, 10, 10, 10, 10, 10, 10, 500, 10, 60, 60, 10, 10]
    entries = [(number, None if size is None else b"x" * size, None) for number, size in enumerate(sizes, 1)]
    lines = [[entry[0] for entry in batch] for batch in batches(entries, 5, 100, 2)]
    # At its count; at a large trace; at small ones adding up (weighed two by two).
    assert lines == [[1, 2, 3, 4, 5], [6, 7, 8, 9], [10, 11, 12, 13], [14]]


def test_jobs_keep_memory_bounded_when_every_trace_is_of_the_largest_size(tmp_path: Path) -> None:
    """A batch is closed at a megabyte of traces, not only at its count: 1,000 traces of the
    1 MiB limit would otherwise be a GB in each batch, twice that in flight."""
    trace = json.loads(EXAMPLE_LINES[0])
    trace["input"] = "x" * (1000 * 1000)
    big = tmp_path / "big.jsonl"
    with big.open("w", encoding="utf-8") as handle:
        for number in range(80):
            handle.write(json.dumps({**trace, "id": f"big-{number}"}) + "\n")
    command = [sys.executable, "manage.py", "guardrail_ci", "--guardrails", *EXAMPLE_GUARDRAILS]
    command += ["--traces", str(big), "--format", "json", "--output", str(tmp_path / "r.json"), "--jobs", "2"]
    done = subprocess.run([sys.executable, "-S", "-c", _PEAK, *command], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode in (0, 1), done.stderr
    report = json.loads((tmp_path / "r.json").read_text(encoding="utf-8"))
    assert report["summary"]["pass"] + report["summary"]["fail"] > 0 and not report["errors"]
    # Each process peaks near 35 MB; a batch of all 80 traces took the command past 170 MB.
    assert int(done.stdout.split()[-1]) < 80 * 1024


def test_jobs_reuse_the_large_blocks_a_batch_passes_through(tmp_path: Path) -> None:
    """Each batch's text and pickle are a megabyte or so: malloc keeps the freed blocks for
    the next batch instead of having the kernel fault in new pages every time."""
    traces = tmp_path / "traces.jsonl"
    with traces.open("w", encoding="utf-8") as handle:
        for number in range(6000):
            handle.write(EXAMPLE_LINES[number % len(EXAMPLE_LINES)] + "\n")
    probe = """
import io, resource, sys
from guardrails.engine.cli import batches, run_guardrail_ci
if sys.argv[1] == "default":
    batches._keep_freed_blocks = lambda: None
run_guardrail_ci(sys.argv[2:], io.StringIO(), io.StringIO())
print(sum(resource.getrusage(who).ru_minflt for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)))
"""
    faults = {}
    for mode in ("kept", "default"):
        argv = ["--guardrails", *EXAMPLE_GUARDRAILS, "--traces", str(traces), "--format", "json", "--jobs", "2"]
        argv += ["--output", str(tmp_path / f"{mode}.json")]
        done = subprocess.run([sys.executable, "-c", probe, mode, *argv], cwd=ROOT, capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        faults[mode] = int(done.stdout)
    assert (tmp_path / "kept.json").read_bytes() == (tmp_path / "default.json").read_bytes()
    # The three processes' start fault in some 10,000 pages either way.
    assert faults["kept"] + 3000 < faults["default"], faults


def test_a_worker_that_dies_makes_the_rest_bad_input_not_a_run_that_hangs(tmp_path: Path) -> None:
    """A --jobs worker killed while the pool writes it a batch: the run ends at once with
    a valid report of what was evaluated, the lines it could not evaluate named, status 2.
    (Before, the pool's clean-up waited forever for the write to the dead worker.)"""
    traces = tmp_path / "traces.jsonl"
    with traces.open("w", encoding="utf-8") as handle:
        for number in range(2000):
            handle.write(json.dumps({**json.loads(EXAMPLE_LINES[number % len(EXAMPLE_LINES)]), "id": f"t-{number}"}))
            handle.write("\n")
    later = tmp_path / "later.jsonl"
    later.write_text(EXAMPLE_LINES[0] + "\n", encoding="utf-8")
    # The worker given line 450 kills itself; batches of 200 lines (some 140 KB, over the
    # pipe's 64 KiB), so that the pool is writing one to the dead worker.
    probe = """
import io, os, signal, sys
from guardrails.engine.cli import batches, run_guardrail_ci
batches.BATCH_SIZE = 200
def dying(path, entries):
    if any(line == 450 for line, _raw, _item in entries):
        os.kill(os.getpid(), signal.SIGKILL)
    return batches._WORKER.run(path, entries)
dying.__qualname__ = dying.__name__ = "_run_in_worker"  # pickled by name: this one
dying.__module__ = batches.__name__
batches._run_in_worker = dying
err = io.StringIO()
status = run_guardrail_ci(sys.argv[1:], io.StringIO(), err)
print(status)
print(err.getvalue())
"""
    output = tmp_path / "report.json"
    argv = ["--guardrails", *EXAMPLE_GUARDRAILS, "--traces", str(traces), str(later), "--format", "json"]
    argv += ["--jobs", "2", "--output", str(output)]
    done = subprocess.run([sys.executable, "-c", probe, *argv], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    status, message = done.stdout.split("\n", 1)
    assert status == "2"
    first = int(re.search(r"the traces from line (\d+) on were not evaluated", message).group(1))
    assert f"{traces}: a worker process of --jobs ended abruptly" in message and first <= 401
    assert f"{later}: a worker process of --jobs ended abruptly" in message  # the pool is gone
    report = json.loads(output.read_text(encoding="utf-8"))
    evaluated = [result["trace"] for result in report["results"][::7]]
    assert evaluated == [f"t-{number}" for number in range(first - 1)]
    assert report["passed"] is False and len(report["errors"]) == 2


# Runs a command and prints its peak RSS in kB: the largest of its own and its reaped
# workers' (wait4). Linux keeps a process's peak across exec: the command is started from
# this small interpreter, not from the test's.
_PEAK = """
import os, sys
pid = os.fork()
if pid == 0:
    os.execv(sys.argv[1], sys.argv[1:])
_pid, status, usage = os.wait4(pid, 0)
print(usage.ru_maxrss)
sys.exit(os.waitstatus_to_exitcode(status))
"""


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_the_traces_read_before_a_file_breaks_off_are_in_the_report(tmp_path: Path, jobs: str) -> None:
    """A gzip file cut short: the traces read before the break are evaluated (not dropped
    with the batch they were in), then the file is bad input, with or without --jobs."""
    lines = []
    for number in range(400):
        trace = json.loads(EXAMPLE_LINES[number % len(EXAMPLE_LINES)])
        trace["id"] = f"t-{number}"
        lines.append(json.dumps(trace) + "\n")
    packed = gzip.compress("".join(lines).encode(), mtime=0)
    cut = tmp_path / "cut.jsonl.gz"
    cut.write_bytes(packed[: len(packed) * 3 // 4])
    status, out, err = run(
        "--guardrails", *EXAMPLE_GUARDRAILS, "--traces", str(cut), "--format", "json", "--jobs", jobs
    )
    assert status == 2 and "cut.jsonl.gz: the file cannot be read" in err
    report = json.loads(out)
    traces = [result["trace"] for result in report["results"][::7]]
    read = []
    with pytest.raises(BadInput):
        for entry in iter_entries(str(cut), 1 << 20):
            read.append(entry)
    # Every whole line gzip can give before the break, many batches' worth (32 a batch in
    # one process).
    assert len(read) == zlib.decompressobj(wbits=31).decompress(cut.read_bytes()).count(b"\n") > 100
    assert traces == [f"t-{number}" for number in range(len(read))]
    assert report["summary"]["pass"] + report["summary"]["fail"] + report["summary"]["skipped"] == 7 * len(traces)


def _without_times(report: str) -> str:
    """The report without how long the run took (text and JUnit say it)."""
    return re.sub(r'\(\d+\.\d+s\)|time="[\d.]+"', "", report)


def test_the_json_report_of_many_batches_parses_and_adds_up(many: list[str]) -> None:
    status, out, _ = run("--guardrails", *EXAMPLE_GUARDRAILS, "--traces", *many, "--format", "json")
    assert status == 2
    report = json.loads(out)
    # Each JSON Lines file has two bad lines (and a.jsonl a blank one); c.json holds 239
    # elements, one of them bad.
    traces = (3 * BATCH_SIZE + 17 - 3) + (BATCH_SIZE + 3 - 2) + 238
    assert len(report["results"]) == 7 * traces == sum(report["summary"].values())
    statuses = [result["status"] for result in report["results"]]
    assert {status: statuses.count(status) for status in report["summary"]} == report["summary"]
    assert [result["trace"] for result in report["results"][:8:7]] == ["t-0", "t-1"]
    assert report["passed"] is False and len(report["errors"]) == 5


def test_the_json_report_is_the_same_however_few_rows_are_kept(many: list[str], monkeypatch: Any) -> None:
    """A trace's results are rendered once per combination of statuses and reasons and
    counted at the end of the batch: forgetting them at every new combination changes nothing."""
    from guardrails.engine.cli import reports

    common = ("--guardrails", *EXAMPLE_GUARDRAILS, "--traces", many[0], "--format", "json")
    kept = run(*common)
    monkeypatch.setattr(reports, "_MAX_ROWS", 1)
    forgotten = run(*common)
    assert forgotten == kept
    monkeypatch.setattr(reports, "_MAX_ROWS", 1024)
    monkeypatch.setattr(reports, "_MAX_ROW_CHARS", 2000)  # two or three rows
    assert run(*common) == kept
    report = json.loads(kept[1])
    statuses = [result["status"] for result in report["results"]]
    assert {status: statuses.count(status) for status in report["summary"]} == report["summary"]
    assert len(set(statuses)) > 2
    for result in report["results"]:  # t-N is on line N + 1, whatever row it came from
        assert result["trace"] == f"t-{result['line'] - 1}" and result["file"] == many[0]


def test_the_rows_kept_stay_bounded_when_every_fail_has_a_long_reason_of_its_own() -> None:
    from guardrails.engine.cli import reports

    guardrail = Guardrail({"id": "g", "kind": "zero-llm", "check": "c", "action": {"on-violation": "block"}})
    renderer = reports.Renderer([guardrail], "json", "t.jsonl")
    for number in range(2000):
        renderer.add(f"t-{number}", number + 1, [("fail", f"{number} " + "x" * 10_000, {})])
        kept = sum(row.size for row in renderer._json_rows.values())
        assert kept <= reports._MAX_ROW_CHARS and len(renderer._json_rows) <= reports._MAX_ROWS
    batch = renderer.take()
    assert batch.traces == 2000 and batch.counts == [{"pass": 0, "fail": 2000, "error": 0, "skipped": 0}]
    results = json.loads(f"[{batch.text}]")
    assert [r["line"] for r in results] == list(range(1, 2001)) and results[-1]["reason"].startswith("1999 ")


def test_the_junit_report_of_many_batches_parses_and_adds_up(many: list[str], tmp_path: Path) -> None:
    output = tmp_path / "report.xml"
    run("--guardrails", *EXAMPLE_GUARDRAILS, "--traces", *many, "--format", "junit", "--output", str(output))
    root = ET.parse(output).getroot()
    suites = root.findall("testsuite")
    assert len(suites) == 8  # one per guardrail, and the bad input
    for suite in suites:
        cases = suite.findall("testcase")
        assert int(suite.get("tests") or -1) == len(cases)
        assert int(suite.get("failures") or -1) == sum(case.find("failure") is not None for case in cases)
    assert int(root.get("tests") or -1) == sum(int(suite.get("tests") or 0) for suite in suites)


@pytest.mark.parametrize("fmt", ["json", "junit"])
def test_a_run_without_traces_writes_a_valid_report(tmp_path: Path, fmt: str) -> None:
    empty = tmp_path / "none.jsonl"
    empty.write_text("", encoding="utf-8")
    status, out, _ = run("--guardrails", *EXAMPLE_GUARDRAILS, "--traces", str(empty), "--format", fmt)
    assert status == 0
    if fmt == "json":
        assert json.loads(out)["results"] == []
    else:
        assert ET.fromstring(out).get("tests") == "0"


def test_the_json_report_is_written_as_batches_come() -> None:
    guardrail = Guardrail({"id": "g", "kind": "zero-llm", "check": "c", "action": {"on-violation": "halt"}})
    out = io.StringIO()
    report = Report([guardrail], "json", out)
    report.add(Batch(traces=1, counts=[{"pass": 1, "fail": 0, "error": 0, "skipped": 0}], text='{"a":1}'))
    assert out.getvalue() == '{"results":[{"a":1}'
    report.add(Batch(traces=1, counts=[{"pass": 1, "fail": 0, "error": 0, "skipped": 0}], text='{"a":2}'))
    report.finish()
    assert json.loads(out.getvalue())["results"] == [{"a": 1}, {"a": 2}]


def test_a_jobs_value_out_of_range_is_bad_input(many: list[str]) -> None:
    status, _, err = run("--guardrails", *EXAMPLE_GUARDRAILS, "--traces", *many, "--jobs", "0")
    assert status == 2 and "--jobs" in err


# --- the engine's plan -------------------------------------------------------------------------


def _raises(config: Any, trace: Any) -> Any:
    raise ValueError("boom")


def _fails(config: Any, trace: Any) -> Any:
    return failed("no", score=1)


def test_a_plan_gives_what_verdict_gives_for_every_guardrail() -> None:
    engine = Engine.default()
    engine.registry.register(define_check("acme.raises", "zero-llm", _raises, config_schema={}, pack="acme"))
    engine.registry.register(define_check("acme.fails", "zero-llm", _fails, config_schema={}, pack="acme"))
    base = {"kind": "zero-llm", "action": {"on-violation": "halt"}, "config": {}}
    documents = [
        {**base, "id": "raises", "check": "acme.raises"},
        {**base, "id": "fails", "check": "acme.fails"},
        {**base, "id": "scoped", "check": "acme.fails", "scope": {"agents": ["other"]}},
        {**base, "id": "cite", "check": "must-cite", "config": {"min": 1}},
        {**base, "id": "external", "kind": "external", "check": "acme.fails"},
    ]
    guardrails = []
    for document in documents:
        registration = define_guardrail(document, registry=engine.registry)
        guardrails.append(registration.guardrail or Guardrail(document))
    gone = Guardrail({**base, "id": "gone", "check": "no-such-check"})
    guardrails.append(gone)
    trace = {"id": "t", "agent": "bot", "output": "see [a]"}
    context = Context("ci", agent="bot")
    plan = engine.plan(guardrails, context)
    assert plan.verdicts(trace) == [engine.verdict(g, trace, context) for g in guardrails]
    # One guardrail of the plan at a time (what a run's chunk times), the same verdicts.
    assert [plan.verdict(index, trace) for index in range(len(guardrails))] == plan.verdicts(trace)
    assert [status for status, _, _ in plan.verdicts(trace)] == ["error", "fail", "skipped", "pass", "error", "error"]
    # Errors are redacted as Engine.verdict redacts them.
    engine.redact = lambda text: text.replace("boom", "[redacted]")
    redacted = engine.plan(guardrails, context).verdicts(trace)
    assert redacted == [engine.verdict(g, trace, context) for g in guardrails]
    assert engine.plan(guardrails, context).verdict(0, trace) == redacted[0]
    assert redacted[0][1] == "check 'acme.raises' raised ValueError: [redacted]"


# --- start-up: what a run imports --------------------------------------------------------------


def _modules_after(argv: list[str]) -> set[str]:
    code = (
        "import io, sys\n"
        "from guardrails.engine.cli import main\n"
        "out = io.StringIO()\n"
        "try:\n"
        f"    main('guardrail_ci', {argv!r}, out, out)\n"
        "except SystemExit:\n"
        "    pass\n"
        "sys.stderr.write(' '.join(sys.modules))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    return set(done.stderr.split())


def test_help_imports_nothing_of_the_engine() -> None:
    modules = _modules_after(["--help"])
    assert not {m for m in modules if m.startswith(("guardrails.engine.evaluate", "jsonschema", "httpx", "re2"))}


def test_help_is_as_wide_as_the_terminal_says() -> None:
    def help_lines(columns: str) -> list[str]:
        env = {**os.environ, "COLUMNS": columns}
        command = [sys.executable, "manage.py", "guardrail_ci", "--help"]
        done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, check=True)
        return done.stdout.splitlines()

    narrow, wide = help_lines("60"), help_lines("160")
    assert len(narrow) > len(wide) and max(map(len, wide)) > 60
    assert max(map(len, narrow)) <= 60 < max(map(len, wide)) <= 158  # width less 2, but for usage


def test_a_run_of_built_in_checks_imports_neither_judge_nor_httpx_nor_sandbox() -> None:
    modules = _modules_after(["--guardrails", *EXAMPLE_GUARDRAILS, "--traces", str(ROOT / "examples" / "traces.jsonl")])
    assert "guardrails.engine.evaluate" in modules
    assert not {m for m in modules if m.startswith(("httpx", "guardrails.engine.judge", "guardrails.engine.sandbox"))}
    # Nor what the engine does not need: argparse's formatter would import shutil (with bz2
    # and lzma) for the terminal's width, pathlib urllib.parse and ipaddress; decimal is the
    # judge's.
    assert not {m for m in modules if m.split(".")[0] in {"shutil", "bz2", "pathlib", "ipaddress", "decimal"}}


def test_a_run_without_a_regular_expression_does_not_load_re2() -> None:
    without_regex = [path for path in EXAMPLE_GUARDRAILS if not path.endswith("output-matches.json")]
    traces = str(ROOT / "examples" / "traces.jsonl")
    modules = _modules_after(["--guardrails", *without_regex, "--traces", traces, "--format", "json"])
    assert "guardrails.engine.checks" in modules
    # re2 (and the C++ runtime it brings), httpx, and the modules only JUnit or .gz files need.
    assert not {m for m in modules if m.split(".")[0] in {"re2", "httpx", "tempfile", "gzip", "html"}}
    assert "re2" in _modules_after(["--guardrails", *EXAMPLE_GUARDRAILS, "--traces", traces])


def test_a_plan_error_raised_for_every_trace_keeps_a_short_traceback() -> None:
    engine = Engine.default()
    gone = Guardrail({"id": "gone", "kind": "zero-llm", "check": "no-such-check", "action": {"on-violation": "halt"}})
    plan = engine.plan([gone], Context("ci"))
    _, run_check = plan.steps[0]
    assert callable(run_check)
    for _ in range(100):
        try:
            run_check({})
        except Exception as exc:
            depth = len(traceback.extract_tb(exc.__traceback__))
    assert depth < 5


def test_bad_input_beyond_a_thousand_lines_is_counted_not_kept(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text("[oops\n" * 1500, encoding="utf-8")
    status, out, err = run("--guardrails", *EXAMPLE_GUARDRAILS, "--traces", str(bad), "--format", "json")
    assert status == 2
    errors = json.loads(out)["errors"]
    assert len(errors) == 1001
    assert errors[-1]["message"] == "... and 500 more traces of bad input, not shown"
    assert err.count("\n") == 1001


def test_jobs_write_the_same_report_to_a_real_stdout(many: list[str]) -> None:
    # The JSON array file is evaluated (and written) before the JSON Lines files' workers
    # start: nothing written may be copied into them.
    common = ["manage.py", "guardrail_ci", "--guardrails", *EXAMPLE_GUARDRAILS, "--format", "json", "--traces"]
    outputs = [
        subprocess.run(
            [sys.executable, *common, many[2], many[0], "--jobs", jobs], cwd=ROOT, capture_output=True, check=False
        ).stdout
        for jobs in ("1", "2")
    ]
    assert outputs[0] == outputs[1]
    assert json.loads(outputs[0])["summary"]
