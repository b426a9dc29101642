"""The engine's vocabulary: traces, contexts, checks, outcomes and results.

Pure Python with no Django import: the CI command, the REST verdict, ingestion and batch
runs all speak these types, which is what keeps the enforcement paths from drifting.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

Mode = Literal["runtime", "ci"]
Status = Literal["pass", "fail", "error", "skipped"]
Turn = Literal["completed", "failed"]

#: A RunTrace in its wire form (camelCase), already validated against runtrace.schema.json.
Trace = Mapping[str, Any]
#: A guardrail's `config`: an opaque JSON object that the resolved check validates.
Config = Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class Issue:
    """One validation error or warning: the JSON pointer of the field and a sentence."""

    path: str
    message: str

    def as_dict(self) -> dict[str, str]:
        return {"path": self.path, "message": self.message}


class IssuesError(Exception):
    """A request that cannot be done as asked: each issue names the field (JSON pointer).

    The one error currency of the services: the API's exception handler turns it into the
    error shape with `status` (400 for a bad request, 403 or 409 where the service says so),
    the pages show its messages. Subclasses only name the service that raised it.
    """

    def __init__(self, issues: Sequence[Issue], status: int = 400) -> None:
        self.issues = list(issues)
        self.status = status
        super().__init__(self.issues[0].message if self.issues else "invalid request")


@dataclass(frozen=True, slots=True)
class CheckOutcome:
    """What a check's evaluate function returns: pass, or fail with a reason.

    `details` carries what a strategy wants kept with the result (a judge's score,
    model and cache hit, for instance); it is shown, never interpreted.
    """

    passed: bool
    reason: str | None = None
    details: Mapping[str, Any] = field(default_factory=dict)


PASSED = CheckOutcome(passed=True)


def failed(reason: str, **details: Any) -> CheckOutcome:
    """A failing outcome with its reason."""
    return CheckOutcome(False, reason, details)


def returned_name(outcome: object) -> str:
    """What a check returned instead of a CheckOutcome (or with a `passed` not a bool)."""
    if isinstance(outcome, CheckOutcome):
        return f"a CheckOutcome whose passed is {type(outcome.passed).__name__}, not bool"
    return type(outcome).__name__


def describe_exception(error: BaseException) -> str:
    """`Type: message` of an exception, even one whose str() itself raises."""
    name = type(error).__name__
    try:
        text = str(error)
    except Exception:
        return f"{name} (its message cannot be shown)"
    return f"{name}: {text}"


class StrategyError(Exception):
    """A strategy could not give a verdict: the result is `error` with this message."""

    def __init__(self, message: str, **details: Any) -> None:
        super().__init__(message)
        self.details = details


@dataclass(frozen=True, slots=True)
class Context:
    """Where an evaluation runs: the mode and the trace's tenant, agent and flow.

    `services` hands strategies what the caller provides (the judge router and ledger,
    the sandbox pool); the engine itself never looks inside.
    """

    mode: Mode
    tenant: str | None = None
    agent: str | None = None
    flow: str | None = None
    services: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def for_trace(cls, trace: Trace, mode: Mode, **services: Any) -> Context:
        """The context a trace implies in `mode`."""
        return cls(
            mode=mode, tenant=trace.get("tenant"), agent=trace.get("agent"), flow=trace.get("flow"), services=services
        )


EvaluateFn = Callable[[Config, Trace], CheckOutcome]
ConfigValidator = Callable[[Config], list[Issue]]


class CheckConfigValidator(Protocol):
    """A check's whole config validation: its config schema, then its hand-written code.
    `json_values`: the config is made of JSON's own types (parsed by orjson), which lets the
    schema's generated proof answer (guardrails.engine.schema)."""

    def __call__(self, config: Config, *, json_values: bool = False) -> list[Issue]: ...


#: A check's evaluate function with one guardrail's config already compiled in.
PreparedFn = Callable[[Trace], CheckOutcome]
#: Compiles a config once (regular expressions, case-folded values) for many traces.
PrepareFn = Callable[[Config], PreparedFn]


@dataclass(frozen=True, slots=True)
class Check:
    """A registered check: its id, kind, config validation and evaluate function.

    `pack` is None for a built-in check, else the name of the pack that defined it.
    `module` and `function` name the evaluate function for a sandboxed run in another
    process. An llm-judge check may have no evaluate function: its strategy does the work.
    `prepare`, when given, compiles a config once so that evaluating it over many traces
    pays for regular expressions and case folding only once; it must agree with `evaluate`.
    """

    id: str
    kind: str
    evaluate: EvaluateFn | None
    validate_config: CheckConfigValidator
    config_schema: Mapping[str, Any] | None = None
    description: str = ""
    pack: str | None = None
    pack_version: str | None = None
    module: str | None = None
    function: str | None = None
    prepare: PrepareFn | None = None
    #: Whether a hand-written validate_config (code, not a schema) checks the config.
    validates_in_code: bool = False
    #: The stages of a turn at which a guardrail of this check applies unless its author
    #: chose others (guardrails.engine.stages): the check's own declaration.
    stages: tuple[str, ...] = ("output",)

    @property
    def builtin(self) -> bool:
        return self.pack is None


@dataclass(frozen=True, slots=True)
class Guardrail:
    """A defined guardrail: the wire document exactly as authored, and what the engine reads.

    `revision` is the console's revision number (None in CI files). The document is kept
    untouched so that export and import round-trip without loss.
    """

    document: Mapping[str, Any]
    revision: int | None = None

    @property
    def id(self) -> str:
        return str(self.document["id"])

    @property
    def kind(self) -> str:
        return str(self.document["kind"])

    @property
    def check(self) -> str:
        return str(self.document["check"])

    @property
    def config(self) -> Config:
        config: Config = self.document.get("config") or {}
        return config

    @property
    def on_violation(self) -> str:
        return str(self.document["action"]["on-violation"])

    @property
    def severity(self) -> str | None:
        severity = self.document.get("severity")
        return None if severity is None else str(severity)

    @property
    def scope(self) -> Mapping[str, Any]:
        scope: Mapping[str, Any] = self.document.get("scope") or {}
        return scope


@dataclass(frozen=True, slots=True)
class Result:
    """One guardrail evaluated against one trace in one context."""

    guardrail: str
    revision: int | None
    status: Status
    action: str
    severity: str | None
    reason: str | None = None
    duration_ms: float = 0.0
    details: Mapping[str, Any] = field(default_factory=dict)

    @property
    def is_violation(self) -> bool:
        return self.status == "fail"

    def as_dict(self) -> dict[str, Any]:
        return {
            "guardrail": self.guardrail,
            "revision": self.revision,
            "status": self.status,
            "reason": self.reason,
            "action": self.action,
            "severity": self.severity,
            "durationMs": round(self.duration_ms, 3),
            "details": dict(self.details),
        }


@dataclass(frozen=True, slots=True)
class TurnVerdict:
    """The runtime outcome of a turn: `failed` with `guardrail-violation` when a halt fails,
    or `guardrail-error` when a guardrail that fails closed errs (`error` then names it:
    ``{"guardrail": id, "message": reason}``)."""

    turn: Turn
    reason: str | None
    results: list[Result]
    error: dict[str, str] | None = None

    @property
    def withheld(self) -> bool:
        """Whether the turn's response must not be stored (a `halt` guardrail failed)."""
        return self.turn == "failed"


class Strategy(Protocol):
    """How a kind is evaluated. Raise StrategyError (or anything) to give `error`."""

    def evaluate(self, guardrail: Guardrail, check: Check, trace: Trace, context: Context) -> CheckOutcome: ...
