"""How good a guardrail is, from what reviewers said of its violations.

Per guardrail and per revision, over a period: violations, reviewed (moved out of `open`),
marked false positive, precision (1 - false positives / reviewed) with its 95% Wilson
interval, and review coverage (reviewed / violations). Always of the violations the caller
may read in one tenant, so that one tenant's reviews never show in another's figures.

The interval is Wilson's (guardrails.engine.statistics: unlike the normal approximation it
stays inside [0, 1] and behaves with few reviews, the common case here), the one the
calibration and the labelled sets use too.

Two ways to the same figures: `quality_of` counts the violations it is given (any filter),
`rolled_up_quality` reads the daily roll-up that the violation writers and the review keep
(`traces.store.violation_days`), plus the violations of a period's partial first and last days:
a fixed number of queries whose cost does not grow with the violations stored. The pages,
the API and the guardrail list's sort read the roll-up.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from typing import Any

from django.db.models import Count, Q, QuerySet, Sum
from django.utils import timezone

from guardrails.engine.statistics import wilson
from traces.models import Violation, ViolationDay

REVIEWED = Q(state__in=[Violation.State.ACKNOWLEDGED, Violation.State.RESOLVED, Violation.State.FALSE_POSITIVE])
FALSE_POSITIVE = Q(state=Violation.State.FALSE_POSITIVE)


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
            "violations": self.violations,
            "reviewed": self.reviewed,
            "falsePositives": self.false_positives,
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
    return {
        "violations": Count("pk"),
        "reviewed": Count("pk", filter=REVIEWED),
        "false_positives": Count("pk", filter=FALSE_POSITIVE),
    }


def quality_of(violations: QuerySet[Violation]) -> tuple[Quality, list[Quality]]:
    """The guardrail's quality over `violations` (one guardrail's, already scoped), overall
    and per revision (newest first): two aggregate queries."""
    overall = Quality(**violations.aggregate(**counts(violations)))
    rows: Iterable[Mapping[str, Any]] = (
        violations.order_by().values("revision__number").annotate(**counts(violations)).order_by("-revision__number")
    )
    per_revision = [
        Quality(
            revision=row["revision__number"],
            violations=row["violations"],
            reviewed=row["reviewed"],
            false_positives=row["false_positives"],
        )
        for row in rows
    ]
    return overall, per_revision


# ---------------------------------------------------------------------------- from the roll-up


def rolled_up_quality(
    days: QuerySet[ViolationDay],
    violations: QuerySet[Violation],
    since: datetime | None = None,
    until: datetime | None = None,
) -> tuple[Quality, list[Quality]]:
    """What `quality_of(period_violations(violations, since, until))` answers, from the roll-up.

    `days` and `violations` are one guardrail's, scoped alike (the same tenants). The whole
    days of [since, until) are read from `days`; a partial first or last day (a period that
    does not start or end at midnight) from `violations`: one or two queries.
    """
    first, end, edges = split_period(since, until)
    if first is not None:
        days = days.filter(day__gte=first)
    if end is not None:
        days = days.filter(day__lt=end)
    totals: dict[int, list[int]] = defaultdict(lambda: [0, 0, 0])
    rows: Iterable[tuple[Any, ...]]
    if first is None or end is None or first < end:
        rows = (
            days.order_by()
            .values_list("revision__number")
            .annotate(n=Sum("count"), reviewed=Sum("reviewed"), wrong=Sum("false_positives"))
        )
        _add(totals, rows)
    if edges:
        edge = Q()
        for start, stop in edges:
            edge |= Q(created_at__gte=start, created_at__lt=stop)
        rows = (
            violations.filter(edge)
            .order_by()
            .values_list("revision__number")
            .annotate(n=Count("pk"), reviewed=Count("pk", filter=REVIEWED), wrong=Count("pk", filter=FALSE_POSITIVE))
        )
        _add(totals, rows)
    per_revision = [
        Quality(revision=number, violations=n, reviewed=reviewed, false_positives=wrong)
        for number, (n, reviewed, wrong) in sorted(totals.items(), reverse=True)
        if n > 0
    ]
    overall = Quality(
        violations=sum(q.violations for q in per_revision),
        reviewed=sum(q.reviewed for q in per_revision),
        false_positives=sum(q.false_positives for q in per_revision),
    )
    return overall, per_revision


def _add(totals: dict[int, list[int]], rows: Any) -> None:
    for number, n, reviewed, wrong in rows:
        figures = totals[number]
        figures[0] += int(n or 0)
        figures[1] += int(reviewed or 0)
        figures[2] += int(wrong or 0)


def midnight(day: date) -> datetime:
    """The start of `day` in the console's time zone (the roll-up's days are its dates)."""
    return datetime.combine(day, time.min, tzinfo=timezone.get_current_timezone())


def split_period(
    since: datetime | None, until: datetime | None
) -> tuple[date | None, date | None, list[tuple[datetime, datetime]]]:
    """[since, until) as whole days [first, end) (None: open) and the partial days around them."""
    first = end = None
    edges: list[tuple[datetime, datetime]] = []
    if since is not None:
        first = timezone.localdate(since)
        if midnight(first) < since:
            first += timedelta(days=1)
    if until is not None:
        end = timezone.localdate(until)
    if since is not None and until is not None and first is not None and end is not None and first >= end:
        return first, end, [(since, until)] if since < until else []
    if since is not None and first is not None and midnight(first) > since:
        edges.append((since, midnight(first)))
    if until is not None and end is not None and midnight(end) < until:
        edges.append((midnight(end), until))
    return first, end, edges
