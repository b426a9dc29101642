"""The judge cost ledger read back: the one aggregation, the entry list and the CSV exports.

`summarise(entries, group_by)` is what the REST API (`GET ledger`), the ledger page and its
sums CSV all answer from, so that they never disagree. Sums run in the database in one
GROUP BY over the filtered entries (never row by row in Python); the tenant scope and the
filters narrow an indexed (tenant, created_at) range, and on PostgreSQL the covering index
`ledger_tenant_time_sums` holds every column the sums read, so they come from the index
alone. Costs come back as exact decimal strings (`exact`), never through a float.

Counts: `calls` are the calls made to a provider (cache hits are not calls);
`billedCalls` those the provider billed; `cacheHits` the judgements answered from the cache;
`overBudget` the calls beyond their guardrail's declarative budget (cost or latency), with
`overCost` and `overLatency` apart; `errors` the calls that gave no verdict.
"""

from __future__ import annotations

import csv
from collections.abc import Iterable, Iterator, Sequence
from decimal import Decimal
from typing import Any

from django.db.models import Count, F, Q, QuerySet, Sum
from django.db.models.functions import TruncDate

from traces.models import JudgeLedgerEntry

#: What `group_by` may name, and the expression each one groups on.
GROUPS = {
    "guardrail": F("guardrail__guardrail_id"),
    "tenant": F("tenant__slug"),
    "model": F("model_id"),
    "day": TruncDate("created_at"),
}

_CALL = Q(cache_hit=False)
SUMS = {
    "calls": Count("id", filter=_CALL),
    "billed_calls": Count("id", filter=_CALL & Q(billed=True)),
    "cache_hits": Count("id", filter=Q(cache_hit=True)),
    "errors": Count("id", filter=_CALL & Q(outcome="error")),
    "over_budget": Count("id", filter=Q(over_budget_cost=True) | Q(over_budget_latency=True)),
    "over_cost": Count("id", filter=Q(over_budget_cost=True)),
    "over_latency": Count("id", filter=Q(over_budget_latency=True)),
    "input_tokens": Sum("input_tokens"),
    "output_tokens": Sum("output_tokens"),
    "cost_usd": Sum("cost_usd"),
}


class UnknownGrouping(ValueError):
    """A `group_by` name that is not one of GROUPS."""


def parse_group_by(values: Iterable[str]) -> list[str]:
    """Names from `group_by` values (repeated and/or comma-separated), in order, once each;
    an empty name (`group_by=`, `a,,b`) is an error, so that a typo never means "no grouping"."""
    names = [name.strip() for value in values for name in value.split(",")]
    unknown = [name for name in names if name not in GROUPS]
    if unknown:
        raise UnknownGrouping(
            f"cannot group by {unknown[0]!r}: use guardrail, tenant, model or day"
        )
    return list(dict.fromkeys(names))


def exact(value: Decimal | None) -> str:
    """A cost as a plain decimal string without trailing zeros: 0.001250000000 -> 0.00125."""
    if value is None:
        return "0"
    text = format(value, "f")
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return text or "0"


def summarise(entries: QuerySet[JudgeLedgerEntry], group_by: Sequence[str]) -> list[dict[str, Any]]:
    """The ledger summed over `entries` (already scoped and filtered), one query.

    Without `group_by`: one group, the totals. Each group has the group names' values
    (`day` as YYYY-MM-DD) and the counts and sums of the module docstring, camelCased,
    with `costUsd` an exact decimal string. Groups are ordered by their names' values.
    """
    if not group_by:
        return [_group(entries.aggregate(**SUMS), [])]
    columns = [f"g_{name}" for name in group_by]
    rows = (
        entries.annotate(**{f"g_{name}": GROUPS[name] for name in group_by})
        .values(*columns)
        .annotate(**SUMS)
        .order_by(*columns)
    )
    return [_group(row, list(group_by)) for row in rows]


def _group(row: dict[str, Any], group_by: list[str]) -> dict[str, Any]:
    group: dict[str, Any] = {name: row[f"g_{name}"] for name in group_by}
    if group.get("day") is not None:
        group["day"] = group["day"].isoformat()
    group.update(
        calls=row["calls"],
        billedCalls=row["billed_calls"],
        cacheHits=row["cache_hits"],
        errors=row["errors"],
        overBudget=row["over_budget"],
        overCost=row["over_cost"],
        overLatency=row["over_latency"],
        inputTokens=row["input_tokens"] or 0,
        outputTokens=row["output_tokens"] or 0,
        costUsd=exact(row["cost_usd"]),
    )
    return group


#: The columns of a summary after its group names, in the API's order (the sums CSV header).
SUMMARY_COLUMNS = (
    "calls", "billedCalls", "cacheHits", "errors", "overBudget", "overCost", "overLatency",
    "inputTokens", "outputTokens", "costUsd",
)


def totals(groups: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """The sum of already-summed groups (a handful of rows, not entries), shaped as a group.

    The groups of one `summarise` partition its entries, so this equals the ungrouped sums
    without a second query."""
    total: dict[str, Any] = dict.fromkeys(SUMMARY_COLUMNS, 0)
    cost = Decimal(0)
    for group in groups:
        for column in SUMMARY_COLUMNS[:-1]:
            total[column] += group[column]
        cost += Decimal(group["costUsd"])
    total["costUsd"] = exact(cost)
    return total


def summary_csv_lines(groups: Iterable[dict[str, Any]], group_by: Sequence[str]) -> Iterator[str]:
    """A summary as CSV lines: the group names and SUMMARY_COLUMNS, then one line per group."""
    writer = csv.writer(_Echo())
    yield writer.writerow([*group_by, *SUMMARY_COLUMNS])
    for group in groups:
        names = ["" if group[name] is None else group[name] for name in group_by]
        yield writer.writerow([_cell(value) for value in [*names, *(group[c] for c in SUMMARY_COLUMNS)]])


def entries_for_listing(entries: QuerySet[JudgeLedgerEntry]) -> QuerySet[JudgeLedgerEntry]:
    """`entries` with the names a listing shows, joined in the same query."""
    return entries.annotate(
        tenant_slug=F("tenant__slug"),
        guardrail_ref=F("guardrail__guardrail_id"),
        revision_number=F("revision__number"),
    )


def entry_dict(entry: JudgeLedgerEntry) -> dict[str, Any]:
    """One ledger entry in the API's camelCase shape (an entry of `entries_for_listing`)."""
    return {
        "id": entry.pk,
        "tenant": entry.tenant_slug,  # type: ignore[attr-defined]
        "guardrail": entry.guardrail_ref,  # type: ignore[attr-defined]
        "revision": entry.revision_number,  # type: ignore[attr-defined]
        "trace": entry.trace_ref or None,
        "evaluation": entry.evaluation_id,
        "model": entry.model_id,
        "provider": entry.provider,
        "modelName": entry.model_name,
        "inputTokens": entry.input_tokens,
        "outputTokens": entry.output_tokens,
        "costUsd": exact(entry.cost_usd),
        "latencyMs": entry.latency_ms,
        "outcome": entry.outcome,
        "verdict": entry.verdict or None,
        "score": entry.score,
        "reason": entry.reason,
        "error": entry.error,
        "billed": entry.billed,
        "attempts": entry.attempts,
        "cacheHit": entry.cache_hit,
        "overBudgetCost": entry.over_budget_cost,
        "overBudgetLatency": entry.over_budget_latency,
        "createdAt": entry.created_at.isoformat().replace("+00:00", "Z"),
    }


CSV_COLUMNS = [
    "createdAt", "tenant", "guardrail", "revision", "trace", "evaluation", "model", "provider",
    "modelName", "inputTokens", "outputTokens", "costUsd", "latencyMs", "outcome", "verdict",
    "score", "reason", "error", "billed", "attempts", "cacheHit", "overBudgetCost",
    "overBudgetLatency",
]
#: Rows read per query while streaming an export: memory stays flat whatever its size.
CSV_CHUNK = 2000


class _Echo:
    """A file-like object whose write gives back what was written (for csv.writer)."""

    def write(self, value: str) -> str:
        return value


def csv_lines(entries: QuerySet[JudgeLedgerEntry]) -> Iterator[str]:
    """The entries as CSV lines, newest first, read in keyset chunks (for a streamed export).

    A cell that a spreadsheet would run as a formula (=, +, -, @ first) is quoted with a
    leading apostrophe: trace content and reasons come from outside.
    """
    writer = csv.writer(_Echo())
    yield writer.writerow(CSV_COLUMNS)
    listing = entries_for_listing(entries).order_by("-created_at", "-pk")
    last: tuple[Any, int] | None = None
    while True:
        chunk = listing
        if last is not None:
            chunk = chunk.filter(Q(created_at__lt=last[0]) | Q(created_at=last[0], pk__lt=last[1]))
        rows = list(chunk[:CSV_CHUNK])
        for entry in rows:
            doc = entry_dict(entry)
            yield writer.writerow([_cell(doc[column]) for column in CSV_COLUMNS])
        if len(rows) < CSV_CHUNK:
            return
        last = (rows[-1].created_at, rows[-1].pk)


#: A cell starting with one of these is read as a formula by spreadsheets: it is quoted.
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def _cell(value: Any) -> Any:
    """`value`, with a leading apostrophe if a spreadsheet would run it (numbers are left be)."""
    if isinstance(value, str) and value.startswith(_FORMULA_START) and not _is_number(value):
        return "'" + value
    return value


def _is_number(value: str) -> bool:
    try:
        Decimal(value)
    except ArithmeticError:
        return False
    return True
