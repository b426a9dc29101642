"""What a rule's `params` may hold, and what a condition rule sees in the daily roll-ups.

A `violations` rule counts `ViolationDay` rows over its window (the last `windowDays` days,
today included) against a threshold, or against `factor` times the same window just
before it (the baseline). A `spend` rule sums `LedgerDay.cost_usd` over today or this
month against `amountUsd`. Both read a few roll-up rows per day: never a raw row. A
`precision` rule asks `traces.review.quality` (the quality page's figures) for a guardrail's
precision from the tenant's reviews over its window, and fires under `threshold` once
`minReviewed` violations were reviewed; it is also evaluated when a review changes.
A `queue_size` rule counts the open violations of a review queue (those an escalate
guardrail's `escalateTo` names) against `threshold`; a `queue_age` rule fires when the
oldest open violation of the queue that nobody claimed is older than `maxAgeMinutes`.
Both read the queues' partial index: a count of one queue's open rows, the first of them.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from decimal import Decimal
from typing import Any

from django.db.models import Q, Sum
from django.utils import timezone
from jsonschema import Draft202012Validator

from alerts.models import AlertRule
from guardrails.engine.types import Issue
from guardrails.models import Guardrail
from traces.models import LedgerDay, Violation, ViolationDay
from traces.review import quality

_FILTERS = {
    "guardrail": {"type": "string", "minLength": 1, "maxLength": 200},
    "severity": {"enum": ["info", "warn", "error", "critical"]},
    "action": {"type": "string", "minLength": 1, "maxLength": 100},
}
PARAMS_SCHEMAS: dict[str, dict[str, Any]] = {
    AlertRule.Kind.VIOLATIONS: {
        "type": "object",
        "additionalProperties": False,
        "properties": {
            **_FILTERS,
            "windowDays": {"type": "integer", "minimum": 1, "maximum": 31},
            "threshold": {"type": "integer", "minimum": 0, "maximum": 10**12},
            "factor": {"type": "number", "exclusiveMinimum": 1, "maximum": 10**6},
            "minCount": {"type": "integer", "minimum": 1, "maximum": 10**12},
        },
        "anyOf": [{"required": ["threshold"]}, {"required": ["factor"]}],
    },
    AlertRule.Kind.SPEND: {
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "guardrail": _FILTERS["guardrail"],
            "period": {"enum": ["day", "month"]},
            "amountUsd": {"type": "number", "exclusiveMinimum": 0, "maximum": 10**9},
            "overBudgetCalls": {"type": "integer", "minimum": 0, "maximum": 10**12},
        },
        "anyOf": [{"required": ["amountUsd"]}, {"required": ["overBudgetCalls"]}],
    },
    AlertRule.Kind.PRECISION: {
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "guardrail": _FILTERS["guardrail"],
            "threshold": {"type": "number", "exclusiveMinimum": 0, "maximum": 1},
            "minReviewed": {"type": "integer", "minimum": 1, "maximum": 10**9},
            "windowDays": {"type": "integer", "minimum": 1, "maximum": 366},
        },
        "required": ["guardrail", "threshold"],
    },
    AlertRule.Kind.QUEUE_SIZE: {
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "queue": {"type": "string", "minLength": 1, "maxLength": 200},
            "threshold": {"type": "integer", "minimum": 0, "maximum": 10**12},
        },
        "required": ["queue", "threshold"],
    },
    AlertRule.Kind.QUEUE_AGE: {
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "queue": {"type": "string", "minLength": 1, "maxLength": 200},
            "maxAgeMinutes": {"type": "integer", "minimum": 1, "maximum": 366 * 24 * 60},
        },
        "required": ["queue", "maxAgeMinutes"],
    },
    AlertRule.Kind.RUN_FAILED: {"type": "object", "additionalProperties": False, "maxProperties": 0},
    AlertRule.Kind.UPLOAD_FAILED: {"type": "object", "additionalProperties": False, "maxProperties": 0},
}
CONDITION_KINDS = (
    AlertRule.Kind.VIOLATIONS,
    AlertRule.Kind.SPEND,
    AlertRule.Kind.PRECISION,
    AlertRule.Kind.QUEUE_SIZE,
    AlertRule.Kind.QUEUE_AGE,
)
#: A precision rule's defaults: reviews needed before it may fire, and its period.
MIN_REVIEWED, PRECISION_WINDOW_DAYS = 10, 30


def validate_params(kind: str, params: object, prefix: str = "/params") -> list[Issue]:
    """The issues of `params` for a rule of `kind`, each with its JSON pointer."""
    schema = PARAMS_SCHEMAS.get(kind)
    if schema is None:
        return [Issue("/kind", f"kind is one of {', '.join(PARAMS_SCHEMAS)}")]
    validator = Draft202012Validator(schema)
    return [
        Issue(prefix + "".join(f"/{part}" for part in _pointer(error)), _message(error))
        for error in sorted(validator.iter_errors(params), key=lambda e: list(e.absolute_path))
    ]


def _pointer(error: Any) -> list[Any]:
    """The path of the field at fault: a missing required field's own, not its object's."""
    path = list(error.absolute_path)
    if error.validator == "required" and isinstance(error.instance, dict):
        path += [name for name in error.validator_value if name not in error.instance][:1]
    return path


def _message(error: Any) -> str:
    if error.validator == "anyOf" and "factor" in str(error.schema):
        return "a violations rule needs a threshold or a factor"
    if error.validator == "anyOf":
        return "a spend rule needs amountUsd or overBudgetCalls"
    if error.validator == "maxProperties":
        return "this kind of rule takes no parameters"
    return str(error.message)


@dataclass(frozen=True)
class Observation:
    """What a rule saw: whether its condition holds, in a sentence, and the figures."""

    breached: bool
    summary: str
    figures: dict[str, Any]


def observe(rule: AlertRule, today: date, now: datetime | None = None) -> Observation:
    """Evaluate a condition rule as of `today` (the console's date) and `now` (a queue's age)."""
    if rule.kind == AlertRule.Kind.SPEND:
        return _spend(rule, today)
    if rule.kind == AlertRule.Kind.PRECISION:
        return _precision(rule, today)
    if rule.kind == AlertRule.Kind.QUEUE_SIZE:
        return _queue_size(rule)
    if rule.kind == AlertRule.Kind.QUEUE_AGE:
        return _queue_age(rule, now or timezone.now())
    return _violations(rule, today)


def _queue_open(rule: AlertRule) -> Any:
    """The open violations of the rule's review queue in its tenant."""
    return Violation.objects.filter(tenant_id=rule.tenant_id, state=Violation.State.OPEN, queue=rule.params["queue"])


def _queue_size(rule: AlertRule) -> Observation:
    """More open violations in the queue than `threshold`."""
    queue, threshold = rule.params["queue"], rule.params["threshold"]
    count = _queue_open(rule).count()
    breached = count > threshold
    relation = "over" if breached else "at or under"
    return Observation(
        breached,
        f"{count} open violation(s) in queue {queue} ({relation} {threshold})",
        {"queue": queue, "open": count, "threshold": threshold},
    )


def _queue_age(rule: AlertRule, now: datetime) -> Observation:
    """The queue's oldest open violation that nobody claimed is older than `maxAgeMinutes`."""
    queue, limit = rule.params["queue"], int(rule.params["maxAgeMinutes"])
    oldest = (
        _queue_open(rule)
        .filter(assignee__isnull=True)
        .order_by("created_at", "pk")
        .values_list("pk", "created_at")
        .first()
    )
    figures: dict[str, Any] = {"queue": queue, "maxAgeMinutes": limit, "oldest": None, "ageMinutes": None}
    if oldest is None:
        return Observation(False, f"queue {queue} has no unclaimed open violation", figures)
    pk, created = oldest
    age = max(0, int((now - created).total_seconds() // 60))
    figures.update(oldest=pk, oldestAt=created.isoformat(), ageMinutes=age)
    breached = age > limit
    relation = "over" if breached else "within"
    return Observation(
        breached, f"queue {queue}'s oldest unclaimed violation ({pk}) waits {age} min ({relation} {limit} min)", figures
    )


def _precision(rule: AlertRule, today: date) -> Observation:
    """The guardrail's precision from the tenant's reviews of its violations over the last
    `windowDays` days (today included), as `traces.review.quality` computes it for the quality
    page: under `threshold` once at least `minReviewed` violations were reviewed."""
    params = rule.params
    window = int(params.get("windowDays", PRECISION_WINDOW_DAYS))
    needed = int(params.get("minReviewed", MIN_REVIEWED))
    start = today - timedelta(days=window - 1)
    figures: dict[str, Any] = {
        "guardrail": params["guardrail"],
        "threshold": params["threshold"],
        "minReviewed": needed,
        "windowDays": window,
        "from": start.isoformat(),
        "to": today.isoformat(),
    }
    guardrail = Guardrail.objects.live().applying_to(rule.tenant_id).filter(guardrail_id=params["guardrail"]).first()
    if guardrail is None:
        return Observation(False, f"guardrail {params['guardrail']} is gone", {**figures, "guardrailGone": True})
    since = timezone.make_aware(datetime.combine(start, time.min))
    violations = Violation.objects.filter(tenant_id=rule.tenant_id, guardrail=guardrail)
    days = ViolationDay.objects.filter(tenant_id=rule.tenant_id, guardrail=guardrail)
    # The window starts at midnight, so only the daily roll-up is read: no scan of violations.
    seen, _ = quality.rolled_up_quality(days, violations, since)
    figures.update(seen.as_dict())
    precision = seen.precision
    if precision is None or seen.reviewed < needed:
        return Observation(
            False, f"{seen.reviewed} of {needed} reviews needed for {guardrail.guardrail_id}'s precision", figures
        )
    breached = precision < params["threshold"]
    relation = "under" if breached else "at or over"
    return Observation(
        breached,
        f"{guardrail.guardrail_id}'s precision {precision:.0%} is {relation} "
        f"{params['threshold']:.0%} ({seen.false_positives} false positives "
        f"of {seen.reviewed} reviewed in {window} day(s))",
        figures,
    )


def _violations(rule: AlertRule, today: date) -> Observation:
    params = rule.params
    window = int(params.get("windowDays", 1))
    start = today - timedelta(days=window - 1)
    rows = ViolationDay.objects.filter(
        tenant_id=rule.tenant_id, day__gte=start - timedelta(days=window), day__lte=today
    )
    if "guardrail" in params:
        rows = rows.filter(guardrail__guardrail_id=params["guardrail"])
    if "severity" in params:
        rows = rows.filter(severity=params["severity"])
    if "action" in params:
        rows = rows.filter(guardrail__on_violation=params["action"])
    sums = rows.aggregate(
        current=Sum("count", filter=Q(day__gte=start)), baseline=Sum("count", filter=Q(day__lt=start))
    )
    current, baseline = int(sums["current"] or 0), int(sums["baseline"] or 0)
    breached, reason = _violations_breached(params, current, baseline)
    figures = {
        "count": current,
        "baseline": baseline,
        "windowDays": window,
        "from": start.isoformat(),
        "to": today.isoformat(),
    }
    return Observation(breached, f"{current} violations in {window} day(s) ({reason})", figures)


def _violations_breached(params: dict[str, Any], current: int, baseline: int) -> tuple[bool, str]:
    if "threshold" in params and current > params["threshold"]:
        return True, f"over {params['threshold']}"
    factor = params.get("factor")
    if factor is not None and current >= params.get("minCount", 1) and current > factor * baseline:
        return True, f"over {factor}x the baseline of {baseline}"
    return False, f"baseline {baseline}"


def _spend(rule: AlertRule, today: date) -> Observation:
    """Judge cost over `amountUsd`, or more judge calls over their guardrail's own `budget`
    (its declared maxCostUsd / maxLatencyMs per call) than `overBudgetCalls`."""
    params = rule.params
    period = params.get("period", "day")
    start = today.replace(day=1) if period == "month" else today
    rows = LedgerDay.objects.filter(tenant_id=rule.tenant_id, day__gte=start, day__lte=today)
    if "guardrail" in params:
        rows = rows.filter(guardrail__guardrail_id=params["guardrail"])
    sums = rows.aggregate(cost=Sum("cost_usd"), over=Sum("over_budget"))
    spent, over = sums["cost"] or Decimal(0), int(sums["over"] or 0)
    figures: dict[str, Any] = {
        "costUsd": str(spent.normalize()),
        "overBudgetCalls": over,
        "period": period,
        "from": start.isoformat(),
        "to": today.isoformat(),
    }
    reasons = []
    if "amountUsd" in params and spent > Decimal(str(params["amountUsd"])):
        reasons.append(f"over ${params['amountUsd']}")
    if "overBudgetCalls" in params and over > params["overBudgetCalls"]:
        reasons.append(f"{over} calls over their guardrail's budget")
    summary = f"judge spend ${spent:.4f} this {period}" + (f" ({', '.join(reasons)})" if reasons else "")
    return Observation(bool(reasons), summary, figures)
