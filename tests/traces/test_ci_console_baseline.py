"""`guardrail_ci --console URL --baseline console`: the console's last finished run of the same
guardrails, read through its API (scoped to the key's tenant), is the baseline."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest

from guardrails.engine.cli import run_guardrail_ci
from kindgi_console.tenancy.models import ApiKey
from tests.conftest import make_guardrail, make_trace
from tests.traces.test_evaluations import run_for, store_traces


def ci(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    status = run_guardrail_ci(list(argv), out, err)
    return status, out.getvalue(), err.getvalue()


def ci_traces(tmp_path: Path) -> str:
    """The console's nine traces as CI sees them after a change: every one calls
    issue_refund, but run-00003, which no longer does, and run-00006, gone."""
    rows = []
    for n in range(9):
        trace = make_trace(f"run-{n:05d}", tenant="acme")
        if n == 3:
            trace["toolCalls"] = trace["toolCalls"][:1]
        if n != 6:
            rows.append(json.dumps(trace))
    path = tmp_path / "t.jsonl"
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    return str(path)


def test_the_last_run_of_the_console_is_the_baseline(
    live_server: Any, acme: Any, acme_key: str, guardrails: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store_traces(acme, 9)  # no-refunds fails run-00000, run-00003 and run-00006
    run = run_for(acme)
    monkeypatch.setenv("KINDGI_API_KEY", acme_key)
    status, out, err = ci("--console", live_server.url, "--traces", ci_traces(tmp_path), "--baseline", "console")
    assert status == 1, err
    assert "BASELINE no-refunds: 6 newly failing, 2 no longer failing" in out
    assert f"(against {live_server.url}/api/v1/evaluations/{run.pk})" in out
    assert "  FIXED run-00003\n  FIXED run-00006\n" in out
    status, out, err = ci(
        "--console", live_server.url, "--traces", ci_traces(tmp_path), "--baseline", "console", "--format", "json"
    )
    by_guardrail = {g["guardrail"]: g for g in json.loads(out)["baseline"]["guardrails"]}
    assert by_guardrail["no-refunds"]["newlyFailing"] == 6
    assert by_guardrail["no-refunds"]["noLongerFailingTraces"] == ["run-00003", "run-00006"]


def test_another_tenants_key_finds_none_of_its_runs(
    live_server: Any, acme: Any, globex: Any, guardrails: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store_traces(acme, 3)
    run_for(acme)
    charlie_key = ApiKey.issue(scopes=["read"], tenant=globex, name="globex ci")[1]
    monkeypatch.setenv("KINDGI_API_KEY", charlie_key)
    status, out, err = ci("--console", live_server.url, "--traces", ci_traces(tmp_path), "--baseline", "console")
    assert status == 2
    assert "the console has no finished ci run of these guardrails" in err
    assert "BASELINE" not in out


def test_baseline_console_needs_the_console(tmp_path: Path) -> None:
    g = tmp_path / "g.json"
    g.write_text(json.dumps(make_guardrail()), encoding="utf-8")
    status, _, err = ci("--guardrails", str(g), "--traces", ci_traces(tmp_path), "--baseline", "console")
    assert status == 2 and "--baseline console needs --console URL" in err
