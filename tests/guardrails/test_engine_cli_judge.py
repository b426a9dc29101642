"""guardrail_ci --judge-models: llm-judge guardrails judged in CI by models from a file."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.conftest import guardrail_ci_files, make_trace, run_guardrail_ci_captured
from tests.fakeproviders import Answer, FakeProvider

JUDGE_GUARDRAIL = {
    "id": "no-refund-promises",
    "kind": "llm-judge",
    "check": "rubric",
    "config": {"criteria": "The agent never promises a refund."},
    "action": {"on-violation": "block"},
    "severity": "error",
    "judgeCapabilities": {"required": ["json"]},
}


def run(*argv: str) -> tuple[int, str, str]:
    return run_guardrail_ci_captured(list(argv))


def files(tmp_path: Path, judges: Any, *traces: dict[str, Any]) -> list[str]:
    return guardrail_ci_files(tmp_path, JUDGE_GUARDRAIL, judges, list(traces))


def test_llm_judge_guardrails_are_judged_in_ci_with_the_keys_from_the_environment(
    tmp_path: Path, monkeypatch: Any
) -> None:
    monkeypatch.setenv("CI_JUDGE_KEY", "sk-ci")
    with FakeProvider(api_key="sk-ci") as provider:
        provider.script(
            Answer('{"verdict": "PASS"}', 1000, 10),
            Answer('{"verdict": "FAIL", "reason": "promises a refund"}', 1000, 10),
        )
        judges = [provider.registration("local", apiKeyEnv="CI_JUDGE_KEY")]
        status, out, err = run(*files(tmp_path, judges, make_trace("a"), make_trace("b")))
    report = json.loads(out)
    assert status == 1  # the FAIL blocks
    statuses = {r["trace"]: r["status"] for r in report["results"]}
    assert statuses == {"a": "pass", "b": "fail"}
    assert "judge: 2 calls (2 billed), 0.000832 USD" in err  # 2 x (1000 x 0.40 + 10 x 1.60) / 1e6
    assert "sk-ci" not in out + err


def test_without_judge_models_an_llm_judge_guardrail_is_an_error(tmp_path: Path) -> None:
    argv = files(tmp_path, [], make_trace("a"))
    without = [*argv[: argv.index("--judge-models")], "--format", "json"]
    status, out, _ = run(*without)
    assert status == 1 and json.loads(out)["results"][0]["status"] == "error"


def test_bad_judge_model_files_give_2_with_pointers(tmp_path: Path) -> None:
    bad = [
        {
            "id": "x",
            "provider": "gemini",
            "model": "m",
            "baseUrl": "http://h/v1",
            "pricing": {"inputUsdPerMTok": 1, "outputUsdPerMTok": 1},
        }
    ]
    status, _, err = run(*files(tmp_path, bad, make_trace("a")))
    assert status == 2 and "j.json: /0/provider:" in err
    status, _, err = run(*files(tmp_path, {"id": "x"}, make_trace("a")))
    assert status == 2 and "a JSON array" in err
    twice = [{**bad[0], "provider": "openai"}] * 2
    status, _, err = run(*files(tmp_path, twice, make_trace("a")))
    assert status == 2 and "registered twice" in err
