"""What a sandboxed evaluation costs against an in-process one.

Run: `python bench/sandbox.py [calls]`. Prints the median microseconds of one evaluation of a
pack check (tests.packs.greetings' `says-word`) in process, under `context-isolated` and under
`strict` (network none, and an allowlist), each measured side by side with the in-process
call, the difference (the target: within 2 ms of in process), and the median time to start
a worker behind the OS boundary (bubblewrap, seccomp, a control group). Prints, never
asserts: timings depend on the machine.
"""

from __future__ import annotations

import statistics
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
POSTURES: dict[str, dict[str, object]] = {
    "in process": {"sandbox": "none"},
    "context-isolated": {"sandbox": "context-isolated"},
    "strict, network none": {"sandbox": "strict", "network": {"kind": "none"}},
    "strict, allowlist": {"sandbox": "strict", "network": {"kind": "allowlist", "hosts": ["api.example.test"]}},
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


def median_us(engine: Engine, g: Guardrail, context: Context, calls: int) -> float:
    assert evaluate_guardrail(g, TRACE, context, engine=engine).status == "pass"  # warm
    times = []
    for _ in range(calls):
        started = time.perf_counter()
        evaluate_guardrail(g, TRACE, context, engine=engine)
        times.append(time.perf_counter() - started)
    return statistics.median(times) * 1e6


def worker_start_ms(engine: Engine, pool: SandboxPool, starts: int) -> float:
    """Median time of a first call for a new tenant: it starts a worker (one per tenant)."""
    g = guardrail(engine, POSTURES["strict, network none"])
    times = []
    for index in range(starts):
        context = Context(mode="ci", tenant=f"tenant-{index}", services={"sandbox": pool})
        started = time.perf_counter()
        assert evaluate_guardrail(g, TRACE, context, engine=engine).status == "pass"
        times.append(time.perf_counter() - started)
    return statistics.median(times) * 1000


def main(calls: int) -> None:
    engine = make_engine()
    defaults = SandboxDefaults(mem_mb=128, cpu_ms=1000, pool_size=1, max_idle=64)
    with SandboxPool(defaults) as pool:
        unavailable = pool.boundary.unavailable()
        if unavailable is not None:
            print(f"no sandbox on this host: {unavailable}")
            return
        context = Context(mode="ci", tenant="bench", services={"sandbox": pool})
        in_process = guardrail(engine, POSTURES["in process"])
        print(
            f"{'posture':<24}{'median us':>11}{'in process':>12}{'difference':>12}{'ratio':>8}   ({calls} calls each)"
        )
        for name, fields in POSTURES.items():
            if name == "in process":
                continue
            sandboxed = guardrail(engine, fields)
            base = median_us(engine, in_process, context, calls)
            us = median_us(engine, sandboxed, context, calls)
            print(f"{name:<24}{us:>11.1f}{base:>12.1f}{us - base:>10.1f}us{us / base:>7.1f}x")
        print(f"worker start (median of 10, first call of a new tenant): {worker_start_ms(engine, pool, 10):.1f} ms")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 2000)
