"""The judge cost ledger summed: the one aggregation behind `GET ledger`, the page and its CSV.

Sums are computed by the database in one GROUP BY over the filtered entries (never row by
row in Python); the filters and the tenant scope narrow an indexed (tenant, created_at)
range, and on PostgreSQL the covering index `ledger_tenant_time_sums` answers the sums
without reading the table.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from decimal import Decimal
from typing import Any

from django.db.models import Count, F, Q, QuerySet, Sum
from django.db.models.functions import TruncDate

from guardrails.engine.types import Issue
from traces.models import JudgeLedgerEntry

#: What entries can be grouped by, and the expression of each group's key.
GROUPS: dict[str, Any] = {
    "guardrail": F("guardrail__guardrail_id"),
    "tenant": F("tenant__slug"),
    "model": F("model_id"),
    "day": TruncDate("created_at"),
}

SUMS: dict[str, Any] = {
    "calls": Count("id"),
    "over_budget": Count("id", filter=Q(over_budget_cost=True) | Q(over_budget_latency=True)),
    "over_cost": Count("id", filter=Q(over_budget_cost=True)),
    "over_latency": Count("id", filter=Q(over_budget_latency=True)),
    "cache_hits": Count("id", filter=Q(cache_hit=True)),
    "input_tokens": Sum("input_tokens"),
    "output_tokens": Sum("output_tokens"),
    "cost_usd": Sum("cost_usd"),
}

#: The columns of a summary, in order, as the API names them (and the CSV's header).
COLUMNS = ("calls", "inputTokens", "outputTokens", "costUsd", "overBudget", "overBudgetCost",
           "overBudgetLatency", "cacheHits")


class GroupByError(ValueError):
    def __init__(self, issue: Issue) -> None:
        super().__init__(issue.message)
        self.issue = issue


def parse_group_by(values: Iterable[str]) -> list[str]:
    """`group_by` values (each may be comma-separated) as a list without repeats.

    An empty name (`group_by=`, `group_by=model,`) is an error, not "no grouping"."""
    names = [name.strip() for value in values for name in value.split(",")]
    unknown = [name for name in names if name not in GROUPS]
    if unknown:
        raise GroupByError(Issue("/group_by", f"cannot group by {unknown[0]!r}: use "
                                              "guardrail, tenant, model or day"))
    return list(dict.fromkeys(names))


def summarize(entries: QuerySet[JudgeLedgerEntry], group_by: list[str]) -> list[dict[str, Any]]:
    """The sums of `entries` per group (one query), ordered by the group keys.

    Each group is `{<group name>: key, ..., "calls", "inputTokens", "outputTokens",
    "costUsd" (exact Decimal), "overBudget", "overBudgetCost", "overBudgetLatency",
    "cacheHits"}`. Without `group_by`, one group of the totals.
    """
    if not group_by:
        return [_group(entries.order_by().aggregate(**SUMS), [])]
    keys = [f"g_{name}" for name in group_by]
    rows = (
        entries.order_by()
        .annotate(**{f"g_{name}": GROUPS[name] for name in group_by})
        .values(*keys)
        .annotate(**SUMS)
        .order_by(*keys)
    )
    return [_group(row, group_by) for row in rows]


def _group(row: dict[str, Any], group_by: list[str]) -> dict[str, Any]:
    group: dict[str, Any] = {name: row[f"g_{name}"] for name in group_by}
    if group.get("day") is not None:
        group["day"] = group["day"].isoformat()
    group.update(
        calls=row["calls"],
        inputTokens=row["input_tokens"] or 0,
        outputTokens=row["output_tokens"] or 0,
        costUsd=row["cost_usd"] if row["cost_usd"] is not None else Decimal("0"),
        overBudget=row["over_budget"],
        overBudgetCost=row["over_cost"],
        overBudgetLatency=row["over_latency"],
        cacheHits=row["cache_hits"],
    )
    return group


def totals(groups: list[dict[str, Any]]) -> dict[str, Any]:
    """The sum of already-summed groups (a handful of rows, not entries)."""
    total: dict[str, Any] = {column: 0 for column in COLUMNS}
    total["costUsd"] = Decimal("0")
    for group in groups:
        for column in COLUMNS:
            total[column] += group[column]
    return total


def as_wire(group: dict[str, Any]) -> dict[str, Any]:
    """A group as JSON answers it: the cost as an exact decimal string."""
    return {**group, "costUsd": format_usd(group["costUsd"])}


def format_usd(value: Decimal) -> str:
    """An exact decimal without exponent or trailing zeros beyond the cent."""
    text = format(value.normalize(), "f") if value else "0"
    if "." in text and len(text.split(".")[1]) < 2:
        text = format(value.quantize(Decimal("0.01")), "f")
    return text


def csv_rows(groups: Iterable[dict[str, Any]], group_by: list[str]) -> Iterator[list[str]]:
    """The CSV of a summary: a header, then one line per group."""
    yield [*group_by, *COLUMNS]
    for group in groups:
        yield [str(group[name] if group[name] is not None else "") for name in group_by] + [
            format_usd(group[column]) if column == "costUsd" else str(group[column])
            for column in COLUMNS
        ]


ENTRY_COLUMNS = ("createdAt", "tenant", "guardrail", "revision", "trace", "model", "inputTokens",
                 "outputTokens", "costUsd", "latencyMs", "outcome", "overBudgetCost",
                 "overBudgetLatency", "cacheHit")


def entries_with_refs(entries: QuerySet[JudgeLedgerEntry]) -> QuerySet[JudgeLedgerEntry]:
    """Entries with the names the lists show (tenant, guardrail, revision, trace), no N+1."""
    return entries.annotate(
        tenant_slug=F("tenant__slug"),
        guardrail_ref=F("guardrail__guardrail_id"),
        revision_number=F("revision__number"),
        trace_ref=F("trace__trace_id"),
    )


def entry_csv_rows(entries: QuerySet[JudgeLedgerEntry]) -> Iterator[list[str]]:
    """The CSV of the entries themselves, streamed from the database in chunks."""
    yield list(ENTRY_COLUMNS)
    for entry in entries_with_refs(entries).order_by("-created_at", "-pk").iterator(2000):
        yield [
            entry.created_at.isoformat(), entry.tenant_slug, entry.guardrail_ref,  # type: ignore[attr-defined]
            str(entry.revision_number or ""), entry.trace_ref or "",  # type: ignore[attr-defined]
            entry.model_id, str(entry.input_tokens), str(entry.output_tokens),
            format_usd(entry.cost_usd), str(entry.latency_ms), entry.outcome,
            str(entry.over_budget_cost).lower(), str(entry.over_budget_latency).lower(),
            str(entry.cache_hit).lower(),
        ]
