"""The CI integrations run as their CI systems run them: the GitHub Action's steps (action.yml)
with the environment a runner provides, the GitLab template's script lines, and the
pre-commit hook (.pre-commit-hooks.yaml) with the real pre-commit in a temporary repository."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import yaml

from tests.guardrails.test_engine_cli import EXAMPLE_TRACES, ROOT

ACTION = yaml.safe_load((ROOT / "action.yml").read_text(encoding="utf-8"))
GITLAB = yaml.safe_load((ROOT / "ci" / "gitlab" / "guardrails.gitlab-ci.yml").read_text(encoding="utf-8"))
#: The PATH the steps start with: the system's, and this interpreter's folder (git, bash, python3).
PATH = f"{Path(sys.executable).parent}:/usr/local/bin:/usr/bin:/bin"
_EXPRESSION = re.compile(r"\$\{\{\s*([a-z_.-]+)\s*\}\}")


class Runner:
    """What a GitHub runner gives a composite action's steps: the files of GITHUB_OUTPUT,
    GITHUB_ENV, GITHUB_PATH and GITHUB_STEP_SUMMARY, RUNNER_TEMP, GITHUB_WORKSPACE (the working
    directory) and GITHUB_ACTION_PATH (this repository), and `${{ }}` expressions of inputs,
    github.action_path and steps' outputs."""

    def __init__(self, tmp: Path, inputs: dict[str, str]) -> None:
        self.tmp, self.workspace = tmp, tmp / "workspace"
        self.workspace.mkdir()
        (tmp / "runner-temp").mkdir()
        self.files = {name: tmp / name.lower() for name in ("GITHUB_STEP_SUMMARY", "GITHUB_ENV", "GITHUB_PATH")}
        for path in self.files.values():
            path.write_text("", encoding="utf-8")
        defaults = {name: str(spec.get("default", "")) for name, spec in ACTION["inputs"].items()}
        self.inputs = {**defaults, **inputs}
        self.outputs: dict[str, dict[str, str]] = {}
        self.stdout = ""

    def value(self, text: str) -> str:
        def evaluate(match: re.Match[str]) -> str:
            name = match.group(1)
            if name.startswith("inputs."):
                return self.inputs[name.removeprefix("inputs.")]
            if name == "github.action_path":
                return str(ROOT)
            step, _, output = name.removeprefix("steps.").partition(".outputs.")
            return self.outputs.get(step, {}).get(output, "")

        return _EXPRESSION.sub(evaluate, text)

    def environment(self, step: dict[str, Any]) -> dict[str, str]:
        env = {"PATH": PATH, "HOME": str(self.tmp), "RUNNER_TEMP": str(self.tmp / "runner-temp")}
        env |= {"GITHUB_WORKSPACE": str(self.workspace), "GITHUB_ACTION_PATH": str(ROOT), "CI": "true"}
        env |= {name: str(path) for name, path in self.files.items()}
        for line in self.files["GITHUB_ENV"].read_text(encoding="utf-8").splitlines():
            name, _, value = line.partition("=")
            env[name] = value
        added = self.files["GITHUB_PATH"].read_text(encoding="utf-8").split()
        env["PATH"] = ":".join([*reversed(added), env["PATH"]])
        env |= {name: self.value(str(value)) for name, value in step.get("env", {}).items()}
        return env

    def run_step(self, step: dict[str, Any]) -> int:
        """A `run` step as the runner runs `shell: bash`; its outputs kept by its id."""
        assert step["shell"] == "bash"
        output = self.tmp / f"output-{len(self.outputs)}"
        output.write_text("", encoding="utf-8")
        script = self.tmp / "step.sh"
        script.write_text(self.value(step["run"]), encoding="utf-8")
        env = self.environment(step) | {"GITHUB_OUTPUT": str(output)}
        done = subprocess.run(
            ["bash", "--noprofile", "--norc", "-eo", "pipefail", str(script)],
            cwd=self.workspace,
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
        self.stdout += done.stdout
        assert done.returncode in (0, 1), done.stderr
        lines = output.read_text(encoding="utf-8").splitlines()
        self.outputs[step.get("id", f"step{len(self.outputs)}")] = dict(line.split("=", 1) for line in lines)
        return done.returncode

    def run_action(self, skip_install: bool = False) -> int:
        """Every step in order (an `if: always()` step too); the last status."""
        status = 0
        for step in ACTION["runs"]["steps"]:
            if "uses" in step:  # another action (upload-artifact): not run here
                assert step.get("if") == "always()"
                continue
            if skip_install and step["name"].startswith("Install"):
                continue
            status = self.run_step(step)
            if status and "id" not in step:
                break
        return status

    @property
    def summary(self) -> str:
        return self.files["GITHUB_STEP_SUMMARY"].read_text(encoding="utf-8")


def workspace_files(runner: Runner) -> None:
    """The guardrails and traces of a repository, and the base branch's JSON report: made on
    the traces but the one where an account is deleted, which fails newly."""
    shutil.copytree(ROOT / "examples" / "guardrails", runner.workspace / "guardrails")
    traces = Path(EXAMPLE_TRACES).read_text(encoding="utf-8").splitlines(keepends=True)
    (runner.workspace / "traces.jsonl").write_text("".join(traces), encoding="utf-8")
    base = runner.workspace / "base-traces.jsonl"
    base.write_text("".join(line for line in traces if "delete_account" not in line), encoding="utf-8")
    guardrails = map(str, sorted((runner.workspace / "guardrails").glob("*.json")))
    report = runner.workspace / "base.json"
    command = [str(Path(sys.executable).parent / "guardrail-ci"), "--guardrails", *guardrails, "--traces", str(base)]
    subprocess.run([*command, "--format", "json", "--output", str(report)], check=False, capture_output=True)


def test_the_action_writes_the_job_summary_annotations_and_junit_against_a_baseline(tmp_path: Path) -> None:
    inputs = {
        "guardrails": "guardrails/*.json",
        "traces": "traces.jsonl",
        "baseline": "base.json",
        "json-report": "guardrail-report.json",
        "python": sys.executable,
    }
    runner = Runner(tmp_path, inputs)
    workspace_files(runner)
    assert runner.run_action() == 1  # the examples fail on purpose: the job fails

    assert runner.outputs["run"] == {"status": "1", "junit": "guardrail-report.xml"}
    summary = runner.summary
    assert summary.startswith("## Guardrails: BLOCKED\n")
    assert "| guardrail | on violation | blocks | pass | fail | error | skipped | newly failing |" in summary
    assert "| `support-never-deletes-accounts` | halt | yes | 10 | 1 | 0 | 1 | 1 | 0 |" in summary
    newly = summary.split("### Newly failing", 1)[1].split("\n### ", 1)[0]
    assert "`support-never-deletes-accounts` on `run-2026-11-29-0007`" in newly
    assert "called forbidden tool 'delete\\_account'" in newly
    assert newly.count("\n- ") == 1
    annotations = [line for line in runner.stdout.splitlines() if line.startswith("::")]
    assert annotations == [
        "::error file=traces.jsonl,line=7,title=support-never-deletes-accounts%3A fail on run-2026-11-29-0007"
        "::called forbidden tool 'delete_account' (tool call 1)"
    ]
    junit = ET.parse(runner.workspace / "guardrail-report.xml").getroot()
    assert junit.get("failures") == "10"
    assert (runner.workspace / "guardrail-report.json").read_text(encoding="utf-8").startswith('{"results":[')
    # The virtual environment the action made holds the command the later steps ran.
    assert (tmp_path / "runner-temp" / "kindgi-guardrails" / "bin" / "guardrail-ci").exists()

    # On regressions only, with the log-only guardrails let through: nothing new blocks.
    runner.inputs |= {"baseline": "guardrail-report.json", "fail-on": "new", "block-on": "halt,retry,escalate"}
    runner.files["GITHUB_STEP_SUMMARY"].write_text("", encoding="utf-8")
    assert runner.run_action(skip_install=True) == 0
    assert runner.outputs["run"]["status"] == "0"
    assert runner.summary.startswith("## Guardrails: PASSED\n")
    assert "| `refund-answers-cite-policy` | log-only | no | 3 | 3 | 0 | 6 | 0 | 0 |" in runner.summary

    # With a labelled set, a labelled case given the wrong verdict blocks, whatever block-on says.
    (runner.workspace / "labels").mkdir()
    case = {"guardrail": "support-never-deletes-accounts", "expected": "fail"}
    trace = {"id": "l1", "agent": "support-bot", "output": "hi"}
    (runner.workspace / "labels" / "deletes.jsonl").write_text(json.dumps({**case, "trace": trace}) + "\n")
    runner.inputs |= {"labels": "labels/*.jsonl"}
    runner.files["GITHUB_STEP_SUMMARY"].write_text("", encoding="utf-8")
    assert runner.run_action(skip_install=True) == 1
    assert "### Labelled set (`labels/deletes.jsonl`)" in runner.summary
    assert (
        "::error file=labels/deletes.jsonl,line=1,title=support-never-deletes-accounts%3A labelled case l1 wrong"
        "::expected fail, got pass"
    ) in runner.stdout


def gitlab_script(env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    """The template's script lines in one shell, stopping at the first that fails, as GitLab's
    runner does, with the template's variables under the job's."""
    job = GITLAB[".kindgi-guardrails"]
    variables = {**job["variables"], **env}
    script = "set -eo pipefail\n" + "\n".join(job["script"]) + "\n"
    return subprocess.run(
        ["bash", "-c", script],
        cwd=cwd,
        env={"PATH": PATH, "HOME": str(cwd), **variables},
        capture_output=True,
        text=True,
        check=False,
    )


def test_the_gitlab_template_runs_its_script_and_keeps_the_junit_report(tmp_path: Path) -> None:
    shutil.copytree(ROOT / "examples" / "guardrails", tmp_path / "guardrails")
    shutil.copy(EXAMPLE_TRACES, tmp_path / "traces.jsonl")
    job = GITLAB[".kindgi-guardrails"]
    assert job["artifacts"]["reports"]["junit"] == "$KINDGI_GUARDRAIL_JUNIT"
    assert job["artifacts"]["when"] == "always"

    done = gitlab_script({}, tmp_path)
    assert done.returncode == 2 and "set KINDGI_GUARDRAILS_PACKAGE" in done.stdout

    package = {"KINDGI_GUARDRAILS_PACKAGE": str(ROOT / "packages" / "guardrails")}
    done = gitlab_script(package, tmp_path)
    assert done.returncode == 1, done.stderr
    assert "BLOCKED: 7 guardrails x 12 traces" in done.stdout
    assert ET.parse(tmp_path / "guardrail-report.xml").getroot().get("tests") == "84"
    assert "| guardrail | on violation |" in (tmp_path / "guardrail-summary.md").read_text(encoding="utf-8")

    lenient = package | {"KINDGI_GUARDRAIL_ARGS": "--block-on halt --fail-on any"}
    (tmp_path / "only-fine.jsonl").write_text(Path(EXAMPLE_TRACES).read_text(encoding="utf-8").splitlines()[0] + "\n")
    done = gitlab_script(lenient | {"KINDGI_TRACE_FILES": "only-fine.jsonl"}, tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr


def git(repo: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, env=git_env(repo))


def git_env(home: Path) -> dict[str, str]:
    return {
        "PATH": PATH,
        "HOME": str(home),
        "GIT_AUTHOR_NAME": "alice",
        "GIT_AUTHOR_EMAIL": "alice@example.com",
        "GIT_COMMITTER_NAME": "alice",
        "GIT_COMMITTER_EMAIL": "alice@example.com",
        "PRE_COMMIT_HOME": str(home / ".pre-commit-cache"),
    }


def test_the_pre_commit_hook_validates_the_changed_guardrail_files(tmp_path: Path) -> None:
    repo = tmp_path / "team"
    (repo / "guardrails").mkdir(parents=True)
    (repo / "notes").mkdir()
    git(repo, "init", "-q", "-b", "main")
    shutil.copy(ROOT / "examples" / "guardrails" / "never-call-tool.json", repo / "guardrails")
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "a guardrail")

    bad = '{"id": "g", "kind": "zero-llm", "check": "no-such-check", "config": {}, "action": {"on-violation": "halt"}}'
    (repo / "guardrails" / "new.json").write_text(bad, encoding="utf-8")
    (repo / "notes" / "draft.json").write_text(bad, encoding="utf-8")  # not a guardrail folder: not checked
    git(repo, "add", ".")

    def hook() -> subprocess.CompletedProcess[str]:
        # try-repo: this repository's hooks as a team's .pre-commit-config.yaml would take them
        # (`repo:` this repository), its working tree as it is; on the staged files.
        return subprocess.run(
            [sys.executable, "-m", "pre_commit", "try-repo", str(ROOT), "guardrail-validate"],
            cwd=repo,
            env=git_env(tmp_path),
            capture_output=True,
            text=True,
            check=False,
        )

    done = hook()
    assert done.returncode == 1, done.stdout + done.stderr
    assert "guardrails/new.json (g): invalid" in done.stdout
    assert "/check:" in done.stdout
    assert "notes/draft.json" not in done.stdout
    assert "support-never-deletes-accounts" not in done.stdout  # unchanged: not validated

    shutil.copy(ROOT / "examples" / "guardrails" / "max-tool-calls.json", repo / "guardrails" / "new.json")
    git(repo, "add", ".")
    done = hook()
    assert done.returncode == 0, done.stdout + done.stderr
    assert "validate guardrail files" in done.stdout and "Passed" in done.stdout


def test_the_hook_manifest_is_offline_and_needs_only_the_engine() -> None:
    hooks = yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text(encoding="utf-8"))
    assert [(hook["id"], hook["language"], hook["entry"]) for hook in hooks] == [
        ("guardrail-validate", "system", "guardrail-validate")
    ]
    assert os.access(Path(sys.executable).parent / "guardrail-validate", os.X_OK)
