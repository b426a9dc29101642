"""The engine's evaluation loop against a bare loop over the seven check functions.

Both run over the same traces, parsed once with orjson beforehand. The bare loop calls each
example guardrail's prepared check function (`check.prepare(config)`) on every trace and
keeps each outcome; the engine does what guardrail_ci does per trace, parsing and rendering
aside: the Plan of the trace's (tenant, agent, flow) and its verdicts. The headline ratio
is with the guardrails' scopes removed, so that both evaluate every pair; the ratio with
scopes (some pairs skipped) is printed too. Used by bench/guardrail_ci.py.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import orjson

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from guardrails.engine.cli.batches import Evaluator  # noqa: E402
from guardrails.engine.cli.environment import load_deployment  # noqa: E402
from guardrails.engine.registration import define_guardrail  # noqa: E402
from guardrails.engine.types import Guardrail  # noqa: E402


def _guardrails(paths: Sequence[Path], scoped: bool, deployment: Any) -> list[Guardrail]:
    guardrails = []
    for path in paths:
        document = orjson.loads(path.read_bytes())
        if not scoped:
            document.pop("scope", None)
        registration = define_guardrail(document, registry=deployment.engine.registry)
        assert registration.guardrail is not None, registration.errors
        guardrails.append(registration.guardrail)
    return guardrails


def _bare(functions: Sequence[Callable[[Any], Any]], traces: Sequence[Mapping[str, Any]]) -> float:
    started = time.process_time()
    for trace in traces:
        outcomes = []
        for function in functions:
            outcomes.append(function(trace))
    return time.process_time() - started


def _engine(evaluator: Evaluator, traces: Sequence[Mapping[str, Any]]) -> float:
    started = time.process_time()
    plan = evaluator.plan
    for trace in traces:
        get = trace.get
        plan(get("tenant"), get("agent"), get("flow")).verdicts(trace)
    return time.process_time() - started


def measure(guardrail_paths: Sequence[Path], traces_path: Path, repeat: int = 9) -> tuple[float, float, float]:
    """CPU seconds of the bare loop, of the engine without scopes and of the engine with
    them (best of `repeat`, run alternately: on a shared host a single pass of each can be
    a third slower than the next one)."""
    traces = [orjson.loads(line) for line in traces_path.read_bytes().splitlines() if line.strip()]
    deployment = load_deployment()
    unscoped = _guardrails(guardrail_paths, False, deployment)
    registry = deployment.engine.registry
    functions = []
    for guardrail in unscoped:
        check = registry.get(guardrail.check)
        assert check is not None and check.prepare is not None
        functions.append(check.prepare(guardrail.config))
    limits = (1 << 20, 64)
    flat = Evaluator(deployment.engine, unscoped, {}, "text", limits)
    scoped = Evaluator(deployment.engine, _guardrails(guardrail_paths, True, deployment), {}, "text", limits)
    bare, engine, engine_scoped = [], [], []
    for _ in range(repeat):
        bare.append(_bare(functions, traces))
        engine.append(_engine(flat, traces))
        engine_scoped.append(_engine(scoped, traces))
    return min(bare), min(engine), min(engine_scoped)
