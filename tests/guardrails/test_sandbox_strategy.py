"""Sandboxed guardrails through the engine: the same results on every path, fail closed."""

from __future__ import annotations

import textwrap

import pytest

from guardrails.engine.evaluate import Engine, evaluate_guardrail
from guardrails.engine.packs import load_packs, resolve_filesystem_artifact
from guardrails.engine.registration import RegistrationPolicy, define_guardrail
from guardrails.engine.registry import default_registry
from guardrails.engine.sandbox.strategy import SandboxedZeroLlmStrategy
from guardrails.engine.strategies import ZeroLlmStrategy, default_strategies
from guardrails.engine.types import Context

TRACE = {"output": "hello world"}


@pytest.fixture(scope="module")
def engine():
    registry = default_registry()
    strategies = default_strategies()
    strategies.register("zero-llm", SandboxedZeroLlmStrategy(ZeroLlmStrategy()))
    load_packs(["tests.packs.generated", "tests.packs.hostile"], registry, strategies)
    return Engine(registry, strategies)


def guardrail(engine, check, **fields):
    document = {"id": f"g-{check}", "kind": "zero-llm", "check": check, "action": {"on-violation": "halt"}, **fields}
    registration = define_guardrail(document, registry=engine.registry)
    assert registration.valid, registration.errors
    return registration.guardrail


def run(engine, pool, guardrail_):
    context = Context(mode="ci", services={"sandbox": pool} if pool is not None else {})
    return evaluate_guardrail(guardrail_, TRACE, context, engine=engine)


def test_a_strict_pack_check_runs_in_the_sandbox(engine, pool):
    result = run(engine, pool, guardrail(engine, "sandboxed-says-hello", sandbox="strict", config={"word": "hello"}))
    assert result.status == "pass"


def test_overreaching_the_memory_limit_is_an_error(engine, pool):
    g = guardrail(
        engine, "sandboxed-allocates", sandbox="strict", limits={"memMB": 64, "cpuMs": 2000}, config={"mb": 512}
    )
    result = run(engine, pool, g)
    assert (result.status, result.reason) == ("error", "memory limit 64 MB exceeded")
    assert run(engine, pool, guardrail(engine, "sandboxed-says-hello", sandbox="strict")).status == "pass"


def test_an_endless_loop_is_an_error_at_the_cpu_limit(engine, pool):
    g = guardrail(engine, "sandboxed-loops-forever", sandbox="strict", limits={"memMB": 128, "cpuMs": 200})
    result = run(engine, pool, g)
    assert (result.status, result.reason) == ("error", "CPU limit 200 ms exceeded")


def test_a_guardrail_without_limits_gets_the_defaults(engine, pool):
    g = guardrail(engine, "sandboxed-allocates", sandbox="context-isolated", config={"mb": 512})
    assert run(engine, pool, g).reason == "memory limit 64 MB exceeded"


def test_the_handler_sees_only_what_needs_spec_declares(engine, pool):
    g = guardrail(
        engine,
        "sandboxed-reads-environment",
        sandbox="context-isolated",
        needsSpec={"env": {"KINDGI_TEST_REGION": {}}, "secrets": {"KINDGI_TEST_TOKEN": {}}},
    )
    result = run(engine, pool, g)
    assert result.status == "fail"
    assert result.details["values"] == {"KINDGI_TEST_REGION": "eu", "KINDGI_TEST_TOKEN": "s3cret"}


def test_a_raising_handler_is_an_error(engine, pool):
    result = run(engine, pool, guardrail(engine, "sandboxed-raises", sandbox="strict"))
    assert (result.status, result.reason) == (
        "error",
        "check 'sandboxed-raises' raised ValueError: the check's own bug",
    )


def test_a_sandboxed_guardrail_without_a_pool_is_an_error(engine):
    result = run(engine, None, guardrail(engine, "sandboxed-says-hello", sandbox="strict"))
    assert result.status == "error"
    assert "no sandbox pool is available" in result.reason


def test_sandbox_none_runs_the_pack_check_in_process(engine):
    assert run(engine, None, guardrail(engine, "sandboxed-says-hello", sandbox="none")).status == "pass"
    assert run(engine, None, guardrail(engine, "sandboxed-says-hello")).status == "pass"


def test_a_builtin_check_always_runs_in_process(engine):
    g = guardrail(engine, "required-substring", sandbox="strict", config={"values": ["hello"]})
    assert run(engine, None, g).status == "pass"


AUTHORS_CHECK = """
from guardrails.engine.registry import define_check
from guardrails.engine.types import PASSED

def remembers_everything(config, trace):
    memory = [bytearray(1024 * 1024) for _ in range(config["mb"])]
    return PASSED if memory else PASSED

CHECKS = [define_check("remembers-everything", "zero-llm", remembers_everything,
                       config_schema={"type": "object", "required": ["mb"]})]
"""


def test_an_author_tries_a_filesystem_check_under_strict_limits(engine, pool, tmp_path):
    path = tmp_path / "remembers.py"
    path.write_text(textwrap.dedent(AUTHORS_CHECK))
    registry = engine.registry.copy()
    document = {
        "id": "remembers",
        "kind": "zero-llm",
        "check": "remembers-everything",
        "action": {"on-violation": "log-only"},
        "sandbox": "strict",
        "limits": {"memMB": 64, "cpuMs": 1000},
        "config": {"mb": 8},
        "codeArtifactRef": {"kind": "filesystem", "modulePath": str(path)},
    }
    assert resolve_filesystem_artifact(document, registry) == ([], [])
    registration = define_guardrail(document, registry=registry)
    assert registration.valid, registration.errors
    local = Engine(registry, engine.strategies)
    context = Context(mode="ci", services={"sandbox": pool})
    assert registration.guardrail is not None
    assert evaluate_guardrail(registration.guardrail, TRACE, context, engine=local).status == "pass"
    greedy = define_guardrail({**document, "config": {"mb": 200}}, registry=registry).guardrail
    assert greedy is not None
    result = evaluate_guardrail(greedy, TRACE, context, engine=local)
    assert (result.status, result.reason) == ("error", "memory limit 64 MB exceeded")
    production = define_guardrail(document, registry=registry, policy=RegistrationPolicy(production=True))
    assert [error.path for error in production.errors] == ["/codeArtifactRef/kind"]


@pytest.mark.parametrize(
    "check",
    ["hostile-returns-a-pretender", "hostile-raises-unprintable", "hostile-passed-is-a-string", "sandboxed-raises"],
)
def test_odd_results_give_the_same_verdict_in_process_and_sandboxed(engine, pool, check):
    in_process = run(engine, None, guardrail(engine, check, sandbox="none"))
    sandboxed = run(engine, pool, guardrail(engine, check, sandbox="strict"))
    assert in_process.status == "error"
    assert (sandboxed.status, sandboxed.reason) == (in_process.status, in_process.reason)
