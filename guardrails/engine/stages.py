"""The stages of a turn at which a runtime asks for a verdict: `input`, `tool-call`, `output`.

A runtime checks a turn before the model runs (`input`: the user's input, no output yet),
before each tool call runs (`tool-call`: the turn so far, the proposed call last of
`toolCalls`) and once it has its answer (`output`: the whole turn). Each guardrail applies
at a set of stages, its check's defaults unless its author chose others (console state
beside the wire document); at the other stages it is `skipped` with reason `stage`. CI and
evaluation runs evaluate whole traces with every guardrail, whatever its stages.

What a check reads at the input stage: the built-in checks read `output` and `toolCalls`,
and at `input` a turn has neither, so the stage's text, the turn's `input`, stands where
the output will be (a forbidden-substring at `input` looks for its values in the input).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal

from guardrails.engine.types import Guardrail, Issue, Result, Trace

Stage = Literal["input", "tool-call", "output"]
STAGES: tuple[Stage, ...] = ("input", "tool-call", "output")
#: Where a check's guardrails apply unless it declares otherwise (output and text checks).
DEFAULT_STAGES: tuple[Stage, ...] = ("output",)
#: The tool checks answer whether a proposed call may run, and judge the whole turn.
TOOL_STAGES: tuple[Stage, ...] = ("tool-call", "output")
#: A skipped result's reason (`skipReason`) when the guardrail does not apply at the stage.
STAGE_SKIP = "stage"


def validate_stages(value: object, path: str = "") -> list[Issue]:
    """The issues of a set of stages: a non-empty array of distinct stage names."""
    if not isinstance(value, list) or not value:
        return [Issue(path, f"a non-empty array of stages, each one of {', '.join(STAGES)}")]
    issues = [
        Issue(f"{path}/{index}", f"{item!r} is not a stage: one of {', '.join(STAGES)}")
        for index, item in enumerate(value)
        if item not in STAGES
    ]
    if not issues and len(set(value)) != len(value):
        issues.append(Issue(path, "each stage is named once"))
    return issues


def ordered(stages: Iterable[str]) -> list[str]:
    """The stages in a turn's order."""
    chosen = set(stages)
    return [stage for stage in STAGES if stage in chosen]


def stage_view(trace: Trace, stage: Stage) -> Trace:
    """The trace as the checks read it at `stage`: at `input`, the input is the text they read."""
    if stage != "input":
        return trace
    return {**trace, "output": trace.get("input")}


def stage_step(trace: Trace, stage: Stage) -> int:
    """Which check of its stage this is within the turn: at `tool-call`, the position of the
    proposed call in `toolCalls`; 0 at the other stages (checked once per turn)."""
    calls = trace.get("toolCalls")
    if stage != "tool-call" or not isinstance(calls, list):
        return 0
    return max(len(calls) - 1, 0)


def skipped_at_stage(guardrail: Guardrail, stage: Stage) -> Result:
    """The result of a guardrail that does not apply at `stage`."""
    return Result(
        guardrail=guardrail.id,
        revision=guardrail.revision,
        status="skipped",
        action=guardrail.on_violation,
        severity=guardrail.severity,
        reason=f"the guardrail does not apply at stage {stage}",
        duration_ms=0.0,
        details={"skip": STAGE_SKIP},
    )
