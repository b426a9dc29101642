"""How good a guardrail is, from what reviewers said of its violations.

Per guardrail and per revision, over a period: violations, reviewed (moved out of `open`),
marked false positive, precision (1 - false positives / reviewed) with its 95% Wilson
interval, and review coverage (reviewed / violations). Always of the violations the caller
may read in one tenant, so that one tenant's reviews never show in another's figures.

The Wilson score interval is a few lines of arithmetic (Wilson 1927; Agresti & Coull 1998):
unlike the normal approximation it stays inside [0, 1] and behaves with few reviews, which
is the common case here; a statistics package for this one formula is not worth its weight.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db.models import Count, Q, QuerySet

from traces.models import Violation

Z95 = 1.959963984540054
REVIEWED = Q(state__in=[Violation.State.ACKNOWLEDGED, Violation.State.RESOLVED, Violation.State.FALSE_POSITIVE])
FALSE_POSITIVE = Q(state=Violation.State.FALSE_POSITIVE)


def wilson(successes: int, trials: int, z: float = Z95) -> tuple[float, float] | None:
    """The Wilson score interval of successes / trials (None without trials)."""
    if trials <= 0:
        return None
    p = successes / trials
    denominator = 1 + z * z / trials
    centre = (p + z * z / (2 * trials)) / denominator
    half = z * math.sqrt(p * (1 - p) / trials + z * z / (4 * trials * trials)) / denominator
    return max(0.0, centre - half), min(1.0, centre + half)


@dataclass(frozen=True)
class Quality:
    """What reviewers said of a guardrail's (or one revision's) violations in a period."""

    violations: int
    reviewed: int
    false_positives: int
    revision: int | None = None

    @property
    def precision(self) -> float | None:
        return None if not self.reviewed else 1 - self.false_positives / self.reviewed

    @property
    def interval(self) -> tuple[float, float] | None:
        return wilson(self.reviewed - self.false_positives, self.reviewed)

    @property
    def coverage(self) -> float | None:
        return None if not self.violations else self.reviewed / self.violations

    def as_dict(self) -> dict[str, Any]:
        interval = self.interval
        answer: dict[str, Any] = {
            "violations": self.violations, "reviewed": self.reviewed, "falsePositives": self.false_positives,
            "precision": _rounded(self.precision),
            "precisionInterval": None if interval is None else [_rounded(interval[0]), _rounded(interval[1])],
            "coverage": _rounded(self.coverage),
        }
        if self.revision is not None:
            answer = {"revision": self.revision, **answer}
        return answer


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 4)


def period_violations(
    violations: QuerySet[Violation], since: datetime | None = None, until: datetime | None = None
) -> QuerySet[Violation]:
    if since is not None:
        violations = violations.filter(created_at__gte=since)
    if until is not None:
        violations = violations.filter(created_at__lt=until)
    return violations


def counts(violations: QuerySet[Violation]) -> dict[str, Any]:
    return {"violations": Count("pk"), "reviewed": Count("pk", filter=REVIEWED),
            "false_positives": Count("pk", filter=FALSE_POSITIVE)}


def quality_of(violations: QuerySet[Violation]) -> tuple[Quality, list[Quality]]:
    """The guardrail's quality over `violations` (one guardrail's, already scoped), overall
    and per revision (newest first): two aggregate queries."""
    overall = Quality(**violations.aggregate(**counts(violations)))
    rows = (violations.order_by().values("revision__number").annotate(**counts(violations))
            .order_by("-revision__number"))
    per_revision = [
        Quality(revision=row["revision__number"], violations=row["violations"], reviewed=row["reviewed"],
                false_positives=row["false_positives"])
        for row in rows
    ]
    return overall, per_revision
