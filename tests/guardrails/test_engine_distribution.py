"""kindgi-guardrails (packages/guardrails) installed as a CI job installs it: in a fresh virtual
environment with nothing else, `pip install packages/guardrails`. Its commands report exactly
what manage.py's report, on the examples and on 20,000 traces, with the same exit statuses."""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from bench.guardrail_ci import write_inputs
from tests.guardrails.test_engine_cli import EXAMPLE_GUARDRAILS, EXAMPLE_TRACES, ROOT

# One install, a module fixture: the module runs in one process (tests/conftest.py, SHARED_MODULES).

#: What the installed environment may weigh, pip included (the console's dev install: 542 MB).
MAX_ENVIRONMENT_MB = 60
#: The one difference allowed between two runs' reports: how long each took.
_SECONDS = re.compile(rb'\(\d+\.\d\ds\)|time="\d+\.\d{3}"')


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A virtual environment holding kindgi-guardrails and its dependencies alone."""
    venv = tmp_path_factory.mktemp("engine") / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    subprocess.run(
        [str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", str(ROOT / "packages" / "guardrails")],
        check=True,
        env={**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1"},
    )
    yield venv


def run(command: list[str], cwd: Path = ROOT) -> tuple[int, bytes, bytes]:
    done = subprocess.run(command, cwd=cwd, capture_output=True, check=False)
    return done.returncode, _SECONDS.sub(b"(seconds)", done.stdout), done.stderr


def manage_py(*argv: str) -> tuple[int, bytes, bytes]:
    return run([sys.executable, "manage.py", *argv])


def test_it_installs_the_engine_and_nothing_of_the_console(installed: Path) -> None:
    names = subprocess.run(
        [str(installed / "bin" / "python"), "-m", "pip", "list", "--format", "freeze"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.lower()
    assert "kindgi-guardrails==0.1.0" in names
    for console_only in ("django", "celery", "gunicorn", "psycopg", "djangorestframework", "redis"):
        assert f"\n{console_only}==" not in f"\n{names}", console_only
    probe = "import guardrails.engine.evaluate, importlib.util; print(importlib.util.find_spec('guardrails.models'))"
    done = subprocess.run([str(installed / "bin" / "python"), "-c", probe], cwd="/", capture_output=True, text=True)
    assert done.stdout.strip() == "None", done.stderr


def test_the_installed_environment_stays_under_60_mb(installed: Path) -> None:
    size = sum(path.stat().st_size for path in installed.rglob("*") if path.is_file() and not path.is_symlink())
    assert size < MAX_ENVIRONMENT_MB * 1024 * 1024, f"{size / 1e6:.1f} MB"


@pytest.mark.parametrize("fmt", ["text", "json", "junit", "markdown"])
def test_guardrail_ci_reports_exactly_what_manage_py_reports_on_the_examples(installed: Path, fmt: str) -> None:
    argv = ["--guardrails", *EXAMPLE_GUARDRAILS, "--traces", EXAMPLE_TRACES, "--format", fmt]
    ours = run([str(installed / "bin" / "guardrail-ci"), *argv])
    assert ours == manage_py("guardrail_ci", *argv)
    assert ours[0] == 1 and ours[1]


@pytest.mark.parametrize("fmt", ["text", "json"])
def test_guardrail_validate_reports_exactly_what_manage_py_reports(installed: Path, tmp_path: Path, fmt: str) -> None:
    invalid = tmp_path / "invalid.json"
    invalid.write_text('{"id": "x", "kind": "zero-llm", "check": "nope"}', encoding="utf-8")
    for paths, status in (([*EXAMPLE_GUARDRAILS], 0), ([*EXAMPLE_GUARDRAILS, str(invalid)], 1)):
        argv = [*paths, "--format", fmt]
        ours = run([str(installed / "bin" / "guardrail-validate"), *argv])
        assert ours == manage_py("validate_guardrail", *argv)
        assert ours[0] == status


@pytest.mark.parametrize("fmt", ["text", "json", "junit", "markdown"])
def test_labelled_sets_report_exactly_what_manage_py_reports(installed: Path, tmp_path: Path, fmt: str) -> None:
    deletes = {"id": "a", "agent": "support-bot", "toolCalls": [{"id": "c1", "name": "delete_account"}]}
    guardrail = "support-never-deletes-accounts"
    cases = [
        {"guardrail": guardrail, "expected": "fail", "trace": deletes},
        {"guardrail": guardrail, "expected": "fail", "trace": {"id": "b", "agent": "support-bot", "output": "hi"}},
        {"guardrail": "unknown", "expected": "fail", "trace": {"id": "c"}},
        {"guardrail": guardrail, "expected": "later", "trace": {"id": "d"}},
    ]
    labels = tmp_path / "labels.jsonl"
    labels.write_text("".join(json.dumps(case) + "\n" for case in cases), encoding="utf-8")
    argv = ["--guardrails", *EXAMPLE_GUARDRAILS, "--traces", EXAMPLE_TRACES, "--labels", str(labels), "--format", fmt]
    ours = run([str(installed / "bin" / "guardrail-ci"), *argv])
    assert ours == manage_py("guardrail_ci", *argv)
    assert ours[0] == 2 and b"labels.jsonl:4: /expected: must be pass or fail" in ours[2]
    shown = {
        "text": b"labelled set: 2 cases, 1 wrong",
        "json": b'"cases":2,"wrong":1',
        "junit": b"labels: " + guardrail.encode(),
    }
    assert shown.get(fmt, b"### Labelled set") in ours[1]


def test_bad_input_gives_2_and_the_same_report(installed: Path, tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "a", "messages": 3}\n{"id": "b"}\n', encoding="utf-8")
    argv = ["--guardrails", *EXAMPLE_GUARDRAILS, "--traces", str(bad), str(tmp_path / "missing.jsonl")]
    ours = run([str(installed / "bin" / "guardrail-ci"), *argv])
    assert ours == manage_py("guardrail_ci", *argv)
    assert ours[0] == 2 and ours[1].startswith(b"BAD INPUT: 7 guardrails x 1 traces")


def test_on_20000_traces_the_reports_are_the_same_byte_for_byte(installed: Path, tmp_path: Path) -> None:
    guardrails, traces, _docs = write_inputs(tmp_path, 20_000)
    for fmt in ("json", "junit", "text"):
        argv = ["--guardrails", *map(str, guardrails), "--traces", str(traces), "--format", fmt]
        ours = run([str(installed / "bin" / "guardrail-ci"), *argv], cwd=tmp_path)
        theirs = manage_py("guardrail_ci", *argv)
        assert ours[0] == theirs[0] == 1
        assert ours[2] == theirs[2]
        assert len(ours[1]) > 1_000_000
        assert hashlib.sha256(ours[1]).hexdigest() == hashlib.sha256(theirs[1]).hexdigest(), fmt


def test_python_m_runs_the_commands_and_help_is_argparse_alone(installed: Path) -> None:
    python = str(installed / "bin" / "python")
    argv = ["--guardrails", *EXAMPLE_GUARDRAILS, "--traces", EXAMPLE_TRACES]
    assert run([python, "-m", "guardrails.engine.cli", "ci", *argv], cwd=Path("/")) == run(
        [str(installed / "bin" / "guardrail-ci"), *argv]
    )
    status, out, _ = run([python, "-m", "guardrails.engine.cli", "validate", *EXAMPLE_GUARDRAILS], cwd=Path("/"))
    assert status == 0 and out.count(b": ok\n") == len(EXAMPLE_GUARDRAILS)
    status, _, err = run([python, "-m", "guardrails.engine.cli"], cwd=Path("/"))
    assert status == 2 and b"usage: python -m guardrails.engine.cli {ci,validate}" in err
    probe = (
        "import sys, runpy\n"
        "sys.argv = ['guardrail-ci', '--help']\n"
        "try:\n    runpy.run_module('guardrails.engine.cli', run_name='__main__', alter_sys=True)\n"
        "except SystemExit:\n    pass\n"
        "print(sorted(m for m in sys.modules if m.startswith('guardrails.engine') and 'cli' not in m))\n"
    )
    done = subprocess.run(
        [str(installed / "bin" / "python"), "-c", probe.replace("'--help'", "'ci', '--help'")],
        cwd="/",
        capture_output=True,
        text=True,
        check=False,
    )
    assert "usage: python -m guardrails.engine.cli ci" in done.stdout
    assert done.stdout.strip().endswith("['guardrails.engine']"), done.stdout[-300:]
