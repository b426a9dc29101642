"""The CI commands load the console's packs and sandbox, from the same environment."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest

from guardrails.engine import cli
from guardrails.engine.cli import ci, environment
from guardrails.engine.cli.files import BadInput
from guardrails.engine.sandbox import SandboxPool

TRACE = {"id": "t1", "agent": "a", "startedAt": "2026-01-01T00:00:00Z", "output": "hello world"}


def run(command: Any, *argv: str) -> tuple[int, str, str]:
    stdout, stderr = io.StringIO(), io.StringIO()
    status = command(list(argv), stdout, stderr)
    return status, stdout.getvalue(), stderr.getvalue()


def guardrail(check: str, **fields: Any) -> dict[str, Any]:
    return {"id": f"g-{check}", "kind": "zero-llm", "check": check, "action": {"on-violation": "halt"}, **fields}


@pytest.fixture
def files(tmp_path: Path):
    def make(*guardrails: dict[str, Any]) -> tuple[str, str]:
        g = tmp_path / "g.json"
        g.write_text(json.dumps(list(guardrails)))
        t = tmp_path / "t.jsonl"
        t.write_text(json.dumps(TRACE) + "\n")
        return str(g), str(t)

    return make


@pytest.fixture(autouse=True)
def development(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("KINDGI_CHECK_PACKS", "KINDGI_PRODUCTION", "DJANGO_DEBUG"):
        monkeypatch.delenv(name, raising=False)


def test_a_pack_named_with_the_pack_option_is_loaded(files):
    g, t = files(guardrail("says-word", config={"word": "hello"}))
    assert run(cli.run_guardrail_ci, "--guardrails", g, "--traces", t)[0] == 2
    status, out, _ = run(cli.run_guardrail_ci, "--pack", "tests.packs.greetings", "--guardrails", g, "--traces", t)
    assert status == 0, out
    assert "1 pass" in out


def test_packs_named_in_the_environment_are_loaded(files, monkeypatch):
    monkeypatch.setenv("KINDGI_CHECK_PACKS", "tests.packs.generated, tests.packs.greetings")
    g, _ = files(guardrail("says-word", config={"word": "x"}), guardrail("sandboxed-says-hello"))
    assert run(cli.run_validate_guardrail, g)[0] == 0


def test_an_invalid_pack_is_bad_input_naming_the_pack_and_the_check(files):
    g, t = files(guardrail("must-cite"))
    status, _, err = run(cli.run_guardrail_ci, "--pack", "tests.packs.bad_schema", "--guardrails", g, "--traces", t)
    assert status == 2
    assert "pack 'tests.packs.bad_schema'" in err and "broken-schema" in err


def test_a_builtin_replacing_a_pack_check_is_a_warning(files):
    g, _ = files(guardrail("cites-nothing", config={}))
    status, _, err = run(cli.run_validate_guardrail, "--pack", "tests.packs.shadows_builtin", g)
    assert status == 0
    assert (
        "warning: check packs: the built-in check 'must-cite' replaces check 'must-cite' of "
        "pack 'tests.packs.shadows_builtin'" in err
    )


def test_production_refuses_a_filesystem_artifact(files, monkeypatch, tmp_path):
    fs = {"kind": "filesystem", "modulePath": str(tmp_path / "check.py")}
    g, _ = files(guardrail("must-cite", codeArtifactRef=fs, checkBuiltIn=True))
    monkeypatch.setenv("KINDGI_PRODUCTION", "true")
    status, out, _ = run(cli.run_validate_guardrail, g)
    assert status == 1
    assert "/codeArtifactRef/kind: a filesystem code artifact is refused in production" in out


def test_production_is_on_by_default_when_debug_is_off(files, monkeypatch, tmp_path):
    fs = {"kind": "filesystem", "modulePath": str(tmp_path / "check.py")}
    g, _ = files(guardrail("must-cite", codeArtifactRef=fs, checkBuiltIn=True))
    assert run(cli.run_validate_guardrail, g)[0] == 0
    monkeypatch.setenv("DJANGO_DEBUG", "false")
    assert run(cli.run_validate_guardrail, g)[0] == 1
    monkeypatch.setenv("KINDGI_PRODUCTION", "false")
    assert run(cli.run_validate_guardrail, g)[0] == 0


def test_a_bad_setting_is_bad_input_naming_it(files, monkeypatch):
    g, t = files(guardrail("must-cite"))
    monkeypatch.setenv("KINDGI_PRODUCTION", "maybe")
    status, _, err = run(cli.run_guardrail_ci, "--guardrails", g, "--traces", t)
    assert status == 2
    assert "KINDGI_PRODUCTION='maybe' is not a boolean" in err


class RecordingPools:
    """Every pool the CI command starts, to see that it is shut down."""

    def __init__(self) -> None:
        self.pools: list[SandboxPool] = []

    def __call__(self) -> SandboxPool:
        pool = SandboxPool()
        self.pools.append(pool)
        return pool


def test_the_pool_starts_only_for_a_sandboxed_guardrail_and_is_shut_down(files, monkeypatch):
    pools = RecordingPools()
    monkeypatch.setattr(ci, "sandbox_pool", pools)
    pack = ("--pack", "tests.packs.generated")
    g, t = files(guardrail("sandboxed-says-hello", config={"word": "hello"}))
    assert run(cli.run_guardrail_ci, *pack, "--guardrails", g, "--traces", t)[0] == 0
    strict_builtin = guardrail("required-substring", sandbox="strict", config={"values": ["hello"]})
    g, t = files(strict_builtin)
    assert run(cli.run_guardrail_ci, *pack, "--guardrails", g, "--traces", t)[0] == 0
    assert pools.pools == []
    g, t = files(guardrail("sandboxed-says-hello", sandbox="strict", config={"word": "hello"}))
    status, out, _ = run(cli.run_guardrail_ci, *pack, "--guardrails", g, "--traces", t)
    assert (status, len(pools.pools)) == (0, 1), out
    assert pools.pools[0].started == 1
    assert pools.pools[0].idle_workers() == 0


def test_the_sandbox_limits_come_from_the_environment(monkeypatch):
    monkeypatch.setenv("KINDGI_SANDBOX_MEM_MB", "96")
    monkeypatch.setenv("KINDGI_SANDBOX_CPU_MS", "300")
    pool = environment.sandbox_pool()
    assert (pool.defaults.mem_mb, pool.defaults.cpu_ms, pool.defaults.pool_size) == (96, 300, 2)
    monkeypatch.setenv("KINDGI_SANDBOX_MEM_MB", "8")
    with pytest.raises(BadInput, match="KINDGI_SANDBOX_MEM_MB=8 must be at least 16"):
        environment.sandbox_pool()
