"""What a sandboxed evaluation costs against an in-process one.

Run: `python bench/sandbox.py [calls]`. Prints microseconds per evaluation of one pack check
(tests.packs.greetings' `says-word`) in process, under `context-isolated` and under `strict`
(network none, and an allowlist), the ratios, and the cost of starting a worker. Prints, never
asserts: timings depend on the machine.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from guardrails.engine.evaluate import Engine, evaluate_guardrail
from guardrails.engine.packs import load_packs
from guardrails.engine.registration import define_guardrail
from guardrails.engine.registry import default_registry
from guardrails.engine.sandbox import SandboxDefaults, SandboxPool
from guardrails.engine.sandbox.strategy import SandboxedZeroLlmStrategy
from guardrails.engine.strategies import ZeroLlmStrategy, default_strategies
from guardrails.engine.types import Context, Guardrail

TRACE = {
    "output": "hello world " * 200,
    "toolCalls": [{"name": f"tool-{i}", "arguments": {"q": "x" * 50}} for i in range(20)],
}
POSTURES = {
    "in process": {"sandbox": "none"},
    "context-isolated": {"sandbox": "context-isolated"},
    "strict, network none": {"sandbox": "strict", "network": {"kind": "none"}},
    "strict, allowlist": {
        "sandbox": "strict",
        "network": {"kind": "allowlist", "hosts": ["api.example.test"]},
    },
}


def make_engine() -> Engine:
    registry = default_registry()
    strategies = default_strategies()
    strategies.register("zero-llm", SandboxedZeroLlmStrategy(ZeroLlmStrategy()))
    load_packs(["tests.packs.greetings"], registry, strategies)
    return Engine(registry, strategies)


def guardrail(engine: Engine, fields: dict[str, object]) -> Guardrail:
    document = {
        "id": "bench",
        "kind": "zero-llm",
        "check": "says-word",
        "config": {"word": "hello"},
        "action": {"on-violation": "log-only"},
        **fields,
    }
    registration = define_guardrail(document, registry=engine.registry)
    assert registration.guardrail is not None, registration.errors
    return registration.guardrail


def per_call_us(engine: Engine, g: Guardrail, context: Context, calls: int) -> float:
    assert evaluate_guardrail(g, TRACE, context, engine=engine).status == "pass"  # warm
    started = time.perf_counter()
    for _ in range(calls):
        evaluate_guardrail(g, TRACE, context, engine=engine)
    return (time.perf_counter() - started) / calls * 1e6


def main(calls: int) -> None:
    engine = make_engine()
    with SandboxPool(SandboxDefaults(mem_mb=128, cpu_ms=1000, pool_size=1)) as pool:
        context = Context(mode="ci", services={"sandbox": pool})
        started = time.perf_counter()
        evaluate_guardrail(guardrail(engine, POSTURES["strict, network none"]), TRACE, context, engine=engine)
        cold_ms = (time.perf_counter() - started) * 1000
        baseline = None
        print(f"{'posture':<24}{'us/call':>12}{'ratio':>10}   ({calls} calls)")
        for name, fields in POSTURES.items():
            us = per_call_us(engine, guardrail(engine, fields), context, calls)
            baseline = baseline or us
            print(f"{name:<24}{us:>12.1f}{us / baseline:>9.1f}x")
        print(f"first strict call (starts a worker): {cold_ms:.1f} ms")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 2000)
