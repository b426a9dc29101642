"""What a guardrail's shadow revision would have caught, next to what its enforced one did.

A guardrail saved in shadow beside an enforced revision is evaluated at both on the same
traces (the runtime and runs: `guardrails.services.enforced_guardrails`); its page compares
them over the last days: how many traces each evaluated and failed, and the traces the
shadow revision fails that the enforced one passes (newly caught) and the other way round.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from django.db.models import Count, Q
from django.utils import timezone

from guardrails.models import Guardrail

#: The days the comparison looks back over.
SHADOW_DAYS = 30
#: Traces listed per side of the comparison.
SHOWN = 10


@dataclass
class Side:
    """One revision's figures: traces evaluated and failed (violations, when enforced)."""

    revision: int
    evaluated: int = 0
    failing: int = 0


@dataclass
class ShadowComparison:
    """The shadow revision beside the enforced one (None when nothing is enforced beside it)."""

    shadow: Side
    enforced: Side | None
    newly_failing: list[dict[str, Any]] = field(default_factory=list)
    newly_failing_count: int = 0
    no_longer_failing: list[dict[str, Any]] = field(default_factory=list)
    no_longer_failing_count: int = 0


def shadow_comparison(results: Any, guardrail: Guardrail) -> ShadowComparison | None:
    """The comparison of a guardrail in shadow over `results` (EvaluationResult rows the
    caller may read); None when the guardrail is not in shadow."""
    if not guardrail.shadow:
        return None
    since = timezone.now() - timedelta(days=SHADOW_DAYS)
    recent = results.filter(guardrail=guardrail, created_at__gte=since).exclude(status="skipped")
    shadow_rows = recent.filter(revision__number=guardrail.revision, shadow=True)
    comparison = ShadowComparison(shadow=_side(shadow_rows, guardrail.revision), enforced=None)
    if guardrail.enforced_revision is None:
        return comparison
    enforced_rows = recent.filter(revision__number=guardrail.enforced_revision, shadow=False)
    comparison.enforced = _side(enforced_rows, guardrail.enforced_revision)
    newly = shadow_rows.filter(status="fail", trace_id__in=enforced_rows.filter(status="pass").values("trace_id"))
    gone = enforced_rows.filter(status="fail", trace_id__in=shadow_rows.filter(status="pass").values("trace_id"))
    comparison.newly_failing_count = newly.values("trace_id").distinct().count()
    comparison.newly_failing = _traces(newly)
    comparison.no_longer_failing_count = gone.values("trace_id").distinct().count()
    comparison.no_longer_failing = _traces(gone)
    return comparison


def _side(rows: Any, revision: int) -> Side:
    counts = rows.aggregate(
        evaluated=Count("trace_id", distinct=True), failing=Count("trace_id", distinct=True, filter=Q(status="fail"))
    )
    return Side(revision=revision, evaluated=counts["evaluated"], failing=counts["failing"])


def _traces(rows: Any) -> list[dict[str, Any]]:
    """The newest few traces of `rows`, with the reason the revision gave."""
    found = rows.order_by("-created_at", "-pk").values("trace_id", "trace__trace_id", "reason")[: SHOWN * 4]
    seen: dict[int, dict[str, Any]] = {}
    for row in found:
        if row["trace_id"] not in seen:
            seen[row["trace_id"]] = {"pk": row["trace_id"], "trace_id": row["trace__trace_id"], "reason": row["reason"]}
    return list(seen.values())[:SHOWN]
