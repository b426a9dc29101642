"""Routing a guardrail's judge: the cheapest registered model it may use that can do the job.

A guardrail's `judgeCapabilities` declares what its judge must have. Its keys:

`required`
    A list of capability names (``["json", "reasoning"]``). The judge must have every one.
    Absent or empty: any model will do.
`model`
    The id of one registered judge model. The guardrail is judged by that model or not at all:
    routing fails when it is not registered, disabled, not allowed for the tenant, or lacks a
    required capability. A way to pin a judge (a BYO judge, a model a rubric was tuned on).
`prefer`
    A list of capability names that break ties: among the cheapest models, one with more of
    them is taken. It never makes routing pick a dearer model.

No other key is accepted, so that a misspelt key is refused at registration instead of being
silently ignored. Routing takes, among the enabled registered models that the tenant's policy
allows and that have every required capability, the one with the lowest input + output price per million
tokens; then the one with more preferred capabilities; then the first id in sort order.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ..schema import validate_against
from ..types import Issue
from .models import CAPABILITY_NAME_SCHEMA, JudgeModel, JudgePolicy

_CAPABILITY_LIST = {"type": "array", "uniqueItems": True, "items": CAPABILITY_NAME_SCHEMA}

JUDGE_CAPABILITIES_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "judgeCapabilities",
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "required": {**_CAPABILITY_LIST, "description": "Capabilities the judge must have."},
        "model": {"type": "string", "minLength": 1, "description": "Id of the one registered judge model to use."},
        "prefer": {**_CAPABILITY_LIST, "description": "Capabilities that break price ties."},
    },
}


class NoJudgeModel(LookupError):
    """No registered judge model fits the guardrail and the tenant's policy; says why."""


def validate_judge_capabilities(doc: object, *, base_path: str = "/judgeCapabilities") -> list[Issue]:
    """Every error of a guardrail's `judgeCapabilities`, pointed under `base_path`."""
    return validate_against(JUDGE_CAPABILITIES_SCHEMA, doc, base_path=base_path)


def route(
    models: Iterable[JudgeModel], judge_capabilities: Mapping[str, Any] | None, policy: JudgePolicy | None = None
) -> JudgeModel:
    """The judge for a guardrail declaring `judge_capabilities`; raises NoJudgeModel."""
    policy = policy or JudgePolicy()
    wanted = judge_capabilities or {}
    required: Sequence[str] = wanted.get("required") or ()
    prefer = frozenset(wanted.get("prefer") or ())
    registered = list(models)
    explicit = wanted.get("model")
    if explicit is not None:
        return _explicit(registered, str(explicit), required, policy)
    enabled = [model for model in registered if model.enabled]
    fitting = [model for model in enabled if policy.allows(model.id) and model.capabilities.issuperset(required)]
    if not fitting:
        raise NoJudgeModel(_none_fits(registered, enabled, required, policy))
    return min(fitting, key=lambda m: (m.price_per_mtok, -len(prefer & m.capabilities), m.id))


def _explicit(models: list[JudgeModel], model_id: str, required: Sequence[str], policy: JudgePolicy) -> JudgeModel:
    """The pinned model, if it is registered, allowed and capable enough."""
    model = next((m for m in models if m.id == model_id), None)
    if model is None:
        raise NoJudgeModel(f"judge model {model_id!r} named by judgeCapabilities.model is not registered")
    if not model.enabled:
        raise NoJudgeModel(f"judge model {model_id!r} named by judgeCapabilities.model is disabled")
    if not policy.allows(model.id):
        raise NoJudgeModel(f"judge model {model_id!r} is not allowed for {_tenant(policy)}")
    missing = [name for name in required if name not in model.capabilities]
    if missing:
        raise NoJudgeModel(f"judge model {model_id!r} lacks the required capabilities {', '.join(missing)}")
    return model


def _none_fits(
    registered: list[JudgeModel], models: list[JudgeModel], required: Sequence[str], policy: JudgePolicy
) -> str:
    if not registered:
        return "no judge model is registered"
    if not models:
        return "every registered judge model is disabled"
    if required:
        return f"no registered judge model has capabilities {', '.join(required)} and is allowed for {_tenant(policy)}"
    return f"no registered judge model is allowed for {_tenant(policy)}"


def _tenant(policy: JudgePolicy) -> str:
    return "this evaluation (no tenant)" if policy.tenant is None else f"tenant {policy.tenant}"
