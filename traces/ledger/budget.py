"""The ledger chart's budget line: for one guardrail with `budget.maxCostUsd`, what its calls
of each day may cost within budget (calls x the per-call maximum), and the part of each day's
cost above it drawn apart, in red."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from guardrails.models import Guardrail

OVER_COLOUR = "#dc2626"
BUDGET_COLOUR = "#0f172a"


def max_cost(guardrail_id: str) -> Decimal | None:
    """The guardrail's declared per-call cost budget, if it has one."""
    guardrail = Guardrail.objects.filter(guardrail_id=guardrail_id).only("document").first()
    budget = (guardrail.document.get("budget") or {}) if guardrail is not None else {}
    value = budget.get("maxCostUsd") if isinstance(budget, dict) else None
    return Decimal(str(value)) if isinstance(value, int | float) and value > 0 else None


def with_budget(chart: dict[str, Any], daily: list[dict[str, Any]], per_call: Decimal) -> dict[str, Any]:
    """`chart` (cost per day) split into within and over budget, with the budget as a line."""
    index = {label: n for n, label in enumerate(chart["labels"])}
    calls = [0] * len(index)
    for group in daily:
        if group["day"] in index:
            calls[index[group["day"]]] += group["calls"]
    cost = [sum(Decimal(str(d["data"][n])) for d in chart["datasets"]) for n in range(len(index))]
    budget = [per_call * n for n in calls]
    within = [float(min(c, b)) for c, b in zip(cost, budget, strict=True)]
    over = [float(max(Decimal(0), c - b)) for c, b in zip(cost, budget, strict=True)]
    return {
        **chart,
        "title": f"{chart['title']}, against its budget",
        "datasets": [
            {"label": "within budget", "data": within},
            {"label": "over budget", "data": over, "color": OVER_COLOUR},
            {
                "label": f"budget (calls x ${per_call} a call)",
                "data": [float(b) for b in budget],
                "type": "line",
                "color": BUDGET_COLOUR,
            },
        ],
    }
