"""The console's answer to `POST /api/v1/evaluate`, typed: a `Verdict` of `Result`s."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

Stage = Literal["input", "tool-call", "output"]
FailMode = Literal["open", "closed"]
#: The verdict's `reason` when the console gave none and `fail_mode="closed"` halted the turn.
FAIL_CLOSED = "fail-closed"


@dataclass(frozen=True, slots=True)
class Result:
    """One guardrail's result at the stage checked, as the console answered it."""

    guardrail: str
    revision: int | None
    status: str
    reason: str | None
    action: str | None
    severity: str | None
    duration_ms: float
    details: Mapping[str, Any]
    skip_reason: str | None = None

    @classmethod
    def from_answer(cls, raw: Mapping[str, Any]) -> Result:
        return cls(
            guardrail=str(raw.get("guardrail")),
            revision=raw.get("revision"),
            status=str(raw.get("status")),
            reason=raw.get("reason"),
            action=raw.get("action"),
            severity=raw.get("severity"),
            duration_ms=float(raw.get("durationMs") or 0.0),
            details=raw.get("details") or {},
            skip_reason=raw.get("skipReason"),
        )


@dataclass(frozen=True, slots=True)
class Verdict:
    """Whether the runtime may go on at this stage of the turn.

    `halted` is the console's `"turn": "failed"`; `halted_by` names the guardrail that halts
    it. When the console gave no verdict (unreachable in time, or it refused the request),
    `error` says why and `halted` is what the client's `fail_mode` chose; `raw` is then None.
    """

    halted: bool
    stage: Stage
    reason: str | None = None
    halted_by: str | None = None
    results: tuple[Result, ...] = ()
    error: str | None = None
    status_code: int | None = None
    raw: Mapping[str, Any] | None = field(default=None, repr=False)

    @classmethod
    def from_answer(cls, stage: Stage, status_code: int, raw: Mapping[str, Any]) -> Verdict:
        return cls(
            halted=raw.get("turn") == "failed",
            stage=stage,
            reason=raw.get("reason"),
            halted_by=raw.get("haltedBy"),
            results=tuple(Result.from_answer(result) for result in raw.get("results") or ()),
            status_code=status_code,
            raw=raw,
        )

    @classmethod
    def unanswered(cls, stage: Stage, fail_mode: FailMode, error: str, status_code: int | None = None) -> Verdict:
        """The verdict `fail_mode` gives when the console answered none."""
        closed = fail_mode == "closed"
        return cls(
            halted=closed,
            stage=stage,
            reason=FAIL_CLOSED if closed else None,
            error=f"{error} (fail {fail_mode})",
            status_code=status_code,
        )

    @property
    def answered(self) -> bool:
        """Whether the console gave this verdict (else `fail_mode` did)."""
        return self.raw is not None

    @property
    def trace_status(self) -> str | None:
        """What the console did with the trace: created, duplicate, updated, conflict (None unstored)."""
        trace = (self.raw or {}).get("trace")
        return trace.get("status") if isinstance(trace, Mapping) else None

    def raise_for_halt(self) -> Verdict:
        """Raise `GuardrailViolation` when the turn is halted; else return the verdict."""
        if self.halted:
            raise GuardrailViolation(self)
        return self


class GuardrailViolation(Exception):
    """A halted turn: what an adapter raises so that the agent does not go on."""

    def __init__(self, verdict: Verdict) -> None:
        self.verdict = verdict
        why = verdict.halted_by or verdict.reason or "halted"
        super().__init__(f"halted at {verdict.stage}: {why}" + (f" ({verdict.error})" if verdict.error else ""))
