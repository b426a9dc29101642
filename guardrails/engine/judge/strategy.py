"""The llm-judge strategy and the built-in `rubric` check.

A guardrail of kind ``llm-judge`` naming check ``rubric`` asks a judge model whether the trace
meets the reviewer's criteria. Its config:

`criteria` (required)
    What the agent turn must do or avoid, in plain words: the judge's rubric.
`scale`
    ``"pass-fail"`` (default): the judge answers PASS or FAIL. ``"score"``: the judge answers
    a score from 0 (does not meet the criteria at all) to 1 (fully meets them).
`threshold`
    Required with ``scale: "score"``: the trace passes when the score is at least this.
`include`
    The parts of the trace the judge sees: any of ``input``, ``output``, ``messages``,
    ``toolCalls``, ``citations`` (default ``["input", "output"]``).

The judge is routed by the guardrail's `judgeCapabilities` (see routing.py) among the models
the caller's JudgeServices registers for the trace's tenant. Its answer is cached by guardrail
revision, trace content and model (its id, provider, model name and base URL), so the same
trace judged again is not paid again; a cache hit shows ``"cached": true`` in the result and
makes no call (services that keep a ledger of cache hits may define
``record_cache_hit(model, guardrail, trace, context)``). Services shared by several
evaluations at once may define ``claim(key, until) -> bool`` and ``release(key)``: the
evaluation that claims a judgement calls the judge, and the others wait for its cached answer
(until their own deadline), so that an identical judgement in flight is paid once. Services
may hold a ``circuit`` (a CircuitBreaker, see circuit.py): a provider found down then fails
its calls at once instead of retrying each. Every call made is handed to
JudgeServices.record for the cost ledger (a call that never reached a provider, for want of
its API key, is not a call), flagged when it went over the guardrail's
declarative `budget` (nothing is refused because of a budget).

Packs add llm-judge checks of their own with define_check(kind="llm-judge") and a config that
has the rubric's fields; their own config schema may fix or restrict them. The strategy reads
any llm-judge check's config as a rubric.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from decimal import Decimal
from typing import Any, Protocol, cast

import httpx

from ..registry import define_check
from ..types import Check, CheckOutcome, Config, Context, Guardrail, StrategyError, Trace
from .circuit import CircuitBreaker
from .client import JudgeCall, RetryPolicy, call_judge
from .models import JudgeModel, JudgePolicy, exact_price
from .parsing import JudgeOutcome
from .prompt import DEFAULT_PARTS, TRACE_PARTS, Part, Scale, build_prompt
from .providers import output_limit
from .routing import NoJudgeModel, route

KIND = "llm-judge"
RUBRIC_CHECK_ID = "rubric"

RUBRIC_CONFIG_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "rubric config",
    "type": "object",
    "additionalProperties": False,
    "required": ["criteria"],
    "properties": {
        "criteria": {
            "type": "string",
            "minLength": 1,
            "maxLength": 10000,
            "pattern": r"\S",
            "description": "What the agent turn must do or avoid: the judge's rubric.",
        },
        "scale": {
            "enum": ["pass-fail", "score"],
            "default": "pass-fail",
            "description": "pass-fail: the judge answers PASS or FAIL; score: 0 to 1.",
        },
        "threshold": {
            "type": "number",
            "minimum": 0,
            "maximum": 1,
            "description": "With scale score: the lowest score that passes.",
        },
        "include": {
            "type": "array",
            "items": {"enum": list(TRACE_PARTS)},
            "minItems": 1,
            "uniqueItems": True,
            "default": list(DEFAULT_PARTS),
            "description": "The parts of the trace the judge sees.",
        },
    },
    "if": {"properties": {"scale": {"const": "score"}}, "required": ["scale"]},
    "then": {"required": ["threshold"]},
}


@dataclass(frozen=True, slots=True)
class Rubric:
    """What the judge is asked, read from an llm-judge guardrail's config."""

    criteria: str
    scale: Scale = "pass-fail"
    threshold: float | None = None
    include: tuple[Part, ...] = DEFAULT_PARTS

    @classmethod
    def from_config(cls, config: Config) -> Rubric:
        """The rubric of a config that registration validated; StrategyError if unusable."""
        criteria = config.get("criteria")
        if not isinstance(criteria, str) or not criteria.strip():
            raise StrategyError("the llm-judge check's config has no criteria for the judge")
        scale = cast(Scale, config.get("scale", "pass-fail"))
        threshold = config.get("threshold")
        if scale == "score" and not isinstance(threshold, int | float):
            raise StrategyError("an llm-judge check with scale score needs a threshold")
        include = tuple(cast(list[Part], config.get("include") or DEFAULT_PARTS))
        return cls(criteria, scale, None if threshold is None else float(threshold), include)


class JudgeServices(Protocol):
    """What an evaluation's caller provides the llm-judge strategy, as context.services["judge"].

    The console implements it over its database (registered models, tenant policies, the
    ledger) and cache; InMemoryJudgeServices is the plain-Python one.
    """

    @property
    def deadline(self) -> float:
        """The time.monotonic() instant by which a judge call must be done, retries included."""
        ...

    def models_for(self, tenant: str | None) -> tuple[list[JudgeModel], JudgePolicy]:
        """The registered judge models and the tenant's judge policy."""
        ...

    def cache_get(self, key: str) -> JudgeOutcome | None: ...

    def cache_put(self, key: str, outcome: JudgeOutcome) -> None: ...

    def record(self, call: JudgeCall, guardrail: Guardrail, trace: Trace, context: Context) -> None:
        """Write `call` to the cost ledger under `guardrail` (its id and revision)."""
        ...

    def http_client(self) -> httpx.Client:
        """The HTTP client judge calls go through (the caller owns and closes it)."""
        ...


class JudgementClaims(Protocol):
    """Optional JudgeServices methods that make identical judgements in flight wait for one call.

    `claim` takes the judgement of `key` until the time.monotonic() instant `until` (the claim
    lapses then, should its holder never release it) and says whether it got it; `release`
    gives it back once the outcome is cached, or the call failed.
    """

    def claim(self, key: str, until: float) -> bool: ...

    def release(self, key: str) -> None: ...


#: How often an evaluation waiting for another's judgement looks for its answer.
CLAIM_POLL_S = 0.05


def canonical_json(value: object) -> str:
    """A value's JSON with sorted keys and no spaces: equal content, equal text."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def cache_key(guardrail: Guardrail, trace: Trace, model: JudgeModel) -> str:
    """The judge cache key: guardrail id, revision and document, trace content and model.

    The document is included so that a guardrail without a revision (a CI file) that changes
    its criteria is not answered from the cache of its old criteria; the model is its id,
    provider, model name and base URL, so that a registration changed to another model or
    server is not answered from the cache of the one it replaced.
    """
    parts = [
        guardrail.id,
        "" if guardrail.revision is None else str(guardrail.revision),
        canonical_json(guardrail.document),
        canonical_json(trace),
        model.id,
        model.provider,
        model.model,
        model.base_url,
    ]
    return hashlib.sha256("\x1f".join(parts).encode()).hexdigest()


@dataclass(frozen=True, slots=True)
class Budget:
    """A guardrail's declarative budget per judge call: flagged in the ledger, never enforced."""

    max_cost_usd: Decimal | None = None
    max_latency_ms: int | None = None

    @classmethod
    def of(cls, guardrail: Guardrail) -> Budget:
        budget = guardrail.document.get("budget") or {}
        cost, latency = budget.get("maxCostUsd"), budget.get("maxLatencyMs")
        return cls(
            max_cost_usd=None if cost is None else exact_price(cost),
            max_latency_ms=None if latency is None else int(latency),
        )

    def flag(self, call: JudgeCall) -> JudgeCall:
        """`call` with over_cost / over_latency set where it went beyond this budget."""
        over_cost = self.max_cost_usd is not None and call.cost_usd > self.max_cost_usd
        over_latency = self.max_latency_ms is not None and call.latency_ms > self.max_latency_ms
        return replace(call, over_cost=over_cost, over_latency=over_latency)


class Judge(Protocol):
    """A bring-your-own judge bound as context.services["judge"]: it gives verdicts its own way.

    The strategy tells it from JudgeServices by its `judge` method and hands it the whole
    evaluation; routing, the cache and the ledger are then its business.
    """

    def judge(self, guardrail: Guardrail, check: Check, trace: Trace, context: Context) -> CheckOutcome: ...


class LlmJudgeStrategy:
    """Evaluates llm-judge guardrails by asking the routed judge model (see module docstring).

    context.services["judge"] is either JudgeServices (the console's registered models, cache
    and ledger: the strategy routes, calls and records) or a Judge (bring-your-own).
    """

    def __init__(self, *, retry: RetryPolicy | None = None) -> None:
        self.retry = retry or RetryPolicy()

    def evaluate(self, guardrail: Guardrail, check: Check, trace: Trace, context: Context) -> CheckOutcome:
        bound = _bound(context, guardrail)
        if callable(getattr(bound, "judge", None)):
            return cast(Judge, bound).judge(guardrail, check, trace, context)
        services = cast(JudgeServices, bound)
        rubric = Rubric.from_config(guardrail.config)
        model = _route(services, guardrail, context)
        key = cache_key(guardrail, trace, model)
        cached = services.cache_get(key)
        if cached is not None:
            _note_cache_hit(services, model, guardrail, trace, context)
            return _decide(rubric, cached, _cached_details(model, cached))
        if _claims(services) is not None:
            return self._judge_once(services, rubric, model, key, (guardrail, trace, context))
        return self._judge(services, rubric, model, key, (guardrail, trace, context), services.deadline)

    def _judge_once(
        self, services: JudgeServices, rubric: Rubric, model: JudgeModel, key: str, what: _Judged
    ) -> CheckOutcome:
        """Judge under the claim on `key`, or take the answer of the evaluation that holds it."""
        claims = cast(JudgementClaims, services)
        deadline = services.deadline
        claimed, cached = _claim_or_wait(claims, services, key, deadline)
        try:
            if cached is not None:
                _note_cache_hit(services, model, *what)
                return _decide(rubric, cached, _cached_details(model, cached))
            return self._judge(services, rubric, model, key, what, deadline)
        finally:
            if claimed:
                claims.release(key)

    def _judge(
        self, services: JudgeServices, rubric: Rubric, model: JudgeModel, key: str, what: _Judged, deadline: float
    ) -> CheckOutcome:
        """Call the judge, record the call, cache its outcome and decide."""
        guardrail, trace, context = what
        call = self._call(services, rubric, model, trace, deadline)
        call = Budget.of(guardrail).flag(call)
        if call.attempts:  # a call that never reached a provider (no key set) cost nothing
            services.record(call, guardrail, trace, context)
        if call.outcome is None:
            raise StrategyError(f"judge call failed: {call.error}", **_call_details(call))
        services.cache_put(key, call.outcome)
        return _decide(rubric, call.outcome, _call_details(call))

    def _call(
        self, services: JudgeServices, rubric: Rubric, model: JudgeModel, trace: Trace, deadline: float
    ) -> JudgeCall:
        prompt = build_prompt(rubric.criteria, rubric.scale, trace, rubric.include)
        circuit = getattr(services, "circuit", None)
        return call_judge(
            model,
            prompt,
            http=services.http_client,  # made at the first attempt: none when the circuit refuses
            deadline=deadline,
            scale=rubric.scale,
            retry=self.retry,
            circuit=circuit if isinstance(circuit, CircuitBreaker) else None,
        )


#: What a judgement is about: the guardrail, the trace and the context.
_Judged = tuple[Guardrail, Trace, Context]


def _claims(services: JudgeServices) -> JudgementClaims | None:
    """The services' claims on judgements in flight, when they keep any."""
    has = callable(getattr(services, "claim", None)) and callable(getattr(services, "release", None))
    return cast(JudgementClaims, services) if has else None


def _claim_or_wait(
    claims: JudgementClaims, services: JudgeServices, key: str, deadline: float
) -> tuple[bool, JudgeOutcome | None]:
    """(claimed, outcome): claim the judgement of `key`, or wait until the evaluation that
    holds it has cached its outcome (or gave up, and the claim is free again)."""
    while True:
        if claims.claim(key, deadline):
            return True, services.cache_get(key)  # answered between the miss and the claim?
        cached = services.cache_get(key)
        if cached is not None:
            return False, cached
        if time.monotonic() + CLAIM_POLL_S >= deadline:
            raise StrategyError("another evaluation is judging this trace and did not answer within the time limit")
        time.sleep(CLAIM_POLL_S)


@dataclass(frozen=True, slots=True)
class JudgeEstimate:
    """What judging one trace may cost, before it is judged: at most `cost_usd`."""

    model_id: str
    cache_key: str
    input_tokens: int
    max_output_tokens: int
    cost_usd: Decimal


def estimate_call(guardrail: Guardrail, trace: Trace, model: JudgeModel) -> JudgeEstimate:
    """An upper estimate of judging `trace` with `model`: the prompt at about four characters
    a token, and the whole output limit (thinking included) used. The caller subtracts the
    traces whose `cache_key` is already cached: those cost nothing."""
    rubric = Rubric.from_config(guardrail.config)
    prompt = build_prompt(rubric.criteria, rubric.scale, trace, rubric.include)
    input_tokens = -(-(len(prompt.system) + len(prompt.user)) // 4)
    max_output = output_limit(model)
    return JudgeEstimate(
        model_id=model.id,
        cache_key=cache_key(guardrail, trace, model),
        input_tokens=input_tokens,
        max_output_tokens=max_output,
        cost_usd=model.cost_usd(input_tokens, max_output),
    )


def route_for(services: JudgeServices, guardrail: Guardrail, tenant: str | None) -> JudgeModel:
    """The judge model a guardrail is routed to for `tenant`; raises NoJudgeModel."""
    models, policy = services.models_for(tenant)
    if policy.tenant is None and tenant is not None:
        policy = replace(policy, tenant=tenant)
    return route(models, guardrail.document.get("judgeCapabilities"), policy)


def _note_cache_hit(
    services: JudgeServices, model: JudgeModel, guardrail: Guardrail, trace: Trace, context: Context
) -> None:
    """Tell services that keep a ledger of cache hits (an optional `record_cache_hit`)."""
    note = getattr(services, "record_cache_hit", None)
    if callable(note):
        note(model, guardrail, trace, context)


def _bound(context: Context, guardrail: Guardrail) -> object:
    bound: object = context.services.get("judge")
    if bound is None:
        raise StrategyError(
            f"no judge model is bound: llm-judge guardrail '{guardrail.id}' needs a judge to give "
            'a verdict, and this evaluation was given none (context.services["judge"])'
        )
    return bound


def _route(services: JudgeServices, guardrail: Guardrail, context: Context) -> JudgeModel:
    try:
        return route_for(services, guardrail, context.tenant)
    except NoJudgeModel as error:
        raise StrategyError(str(error)) from None


def _decide(rubric: Rubric, outcome: JudgeOutcome, details: dict[str, Any]) -> CheckOutcome:
    """Pass or fail from the judge's outcome on the rubric's scale."""
    reason = outcome.reason
    if rubric.scale == "score":
        score, threshold = outcome.score, rubric.threshold
        if score is None or threshold is None:
            raise StrategyError("the judge's cached outcome has no score", **details)
        if score >= threshold:
            return CheckOutcome(passed=True, details=details)
        because = f"judge score {score:g} is below the threshold {threshold:g}"
        return CheckOutcome(False, because + (f": {reason}" if reason else ""), details)
    if outcome.verdict == "PASS":
        return CheckOutcome(passed=True, details=details)
    if outcome.verdict == "FAIL":
        return CheckOutcome(False, reason or "the judge answered FAIL without a reason", details)
    raise StrategyError("the judge's cached outcome has no verdict", **details)


def _call_details(call: JudgeCall) -> dict[str, Any]:
    outcome = call.outcome or JudgeOutcome()
    return {
        "model": call.model_id,
        "verdict": outcome.verdict,
        "score": outcome.score,
        "judgeReason": outcome.reason,
        "cached": False,
        "costUsd": str(call.cost_usd),
        "inputTokens": call.input_tokens,
        "outputTokens": call.output_tokens,
        "latencyMs": call.latency_ms,
        "attempts": call.attempts,
        "overCost": call.over_cost,
        "overLatency": call.over_latency,
    }


def _cached_details(model: JudgeModel, outcome: JudgeOutcome) -> dict[str, Any]:
    return {
        "model": model.id,
        "verdict": outcome.verdict,
        "score": outcome.score,
        "judgeReason": outcome.reason,
        "cached": True,
        "costUsd": "0",
        "inputTokens": 0,
        "outputTokens": 0,
    }


def rubric_check() -> Check:
    """The built-in `rubric` check of kind llm-judge; its strategy does the evaluating."""
    return define_check(
        RUBRIC_CHECK_ID,
        KIND,
        config_schema=RUBRIC_CONFIG_SCHEMA,
        description=(
            "Asks a judge model whether the agent turn meets the reviewer's criteria: "
            "PASS or FAIL, or a score from 0 to 1 against a threshold."
        ),
    )


@dataclass
class InMemoryJudgeServices:
    """JudgeServices held in memory: for the CI command, scripts and tests.

    Every model is allowed unless `policies` names the tenant; `calls` keeps what `record`
    was given, in order, and `cache` the judged outcomes; `circuit`, when set, is the
    circuit breaker its calls go through.
    """

    models: list[JudgeModel]
    client: httpx.Client
    policies: Mapping[str, JudgePolicy] = field(default_factory=dict)
    time_limit_s: float = 30.0
    cache: dict[str, JudgeOutcome] = field(default_factory=dict)
    calls: list[tuple[JudgeCall, str, int | None]] = field(default_factory=list)
    circuit: CircuitBreaker | None = None

    @property
    def deadline(self) -> float:
        return time.monotonic() + self.time_limit_s

    def models_for(self, tenant: str | None) -> tuple[list[JudgeModel], JudgePolicy]:
        policy = self.policies.get(tenant or "") or JudgePolicy(tenant=tenant)
        return list(self.models), policy

    def cache_get(self, key: str) -> JudgeOutcome | None:
        return self.cache.get(key)

    def cache_put(self, key: str, outcome: JudgeOutcome) -> None:
        self.cache[key] = outcome

    def record(self, call: JudgeCall, guardrail: Guardrail, trace: Trace, context: Context) -> None:
        self.calls.append((call, guardrail.id, guardrail.revision))

    def http_client(self) -> httpx.Client:
        return self.client
