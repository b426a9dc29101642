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

The daily roll-up: `record` is the one way entries are written; in the same transaction it
adds them to `LedgerDay` (one row per tenant, guardrail, model and day) with an upsert that
increments. When the filters are whole days (or absent), `summarise` is given the roll-up
rows under the same filters (`days`) and sums those instead: a few rows per day, so a
year of calls costs what a day does. Both give the same sums (tests/traces/test_ledger_days.py).
"""

from __future__ import annotations

import csv
from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping, Sequence
from decimal import Decimal
from typing import Any

from django.db import connection, transaction
from django.db.models import Count, F, Q, QuerySet, Sum
from django.db.models.functions import TruncDate
from django.utils import timezone

from traces.models import JudgeLedgerEntry, LedgerDay

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


#: The sums of the roll-up (`LedgerDay`): the same names, added up from its columns.
DAY_SUMS = {name: Sum(name) for name in SUMS}
#: What the roll-up can group by, and the expression each one groups on there.
DAY_GROUPS = {
    "guardrail": F("guardrail__guardrail_id"),
    "tenant": F("tenant__slug"),
    "model": F("model_id"),
    "day": F("day"),
}


class UnknownGrouping(ValueError):
    """A `group_by` name that is not one of GROUPS."""


def parse_group_by(values: Iterable[str]) -> list[str]:
    """Names from `group_by` values (repeated and/or comma-separated), in order, once each;
    an empty name (`group_by=`, `a,,b`) is an error, so that a typo never means "no grouping"."""
    names = [name.strip() for value in values for name in value.split(",")]
    unknown = [name for name in names if name not in GROUPS]
    if unknown:
        raise UnknownGrouping(f"cannot group by {unknown[0]!r}: use guardrail, tenant, model or day")
    return list(dict.fromkeys(names))


def exact(value: Decimal | None) -> str:
    """A cost as a plain decimal string without trailing zeros: 0.001250000000 -> 0.00125."""
    if value is None:
        return "0"
    text = format(value, "f")
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return text or "0"


def summarise(
    entries: QuerySet[JudgeLedgerEntry], group_by: Sequence[str], days: QuerySet[LedgerDay] | None = None
) -> list[dict[str, Any]]:
    """The ledger summed over `entries` (already scoped and filtered), one query.

    `days`: the roll-up rows under the same scope and filters, given when the filters are
    whole days (or absent); the sums then come from them, with the same result.
    Without `group_by`: one group, the totals. Each group has the group names' values
    (`day` as YYYY-MM-DD) and the counts and sums of the module docstring, camelCased,
    with `costUsd` an exact decimal string. Groups are ordered by their names' values.
    """
    source: QuerySet[Any] = entries
    sums: Mapping[str, Any] = SUMS
    groups: Mapping[str, Any] = GROUPS
    if days is not None and set(group_by) <= set(DAY_GROUPS):
        source, sums, groups = days, DAY_SUMS, DAY_GROUPS
    if not group_by:
        return [_group(source.aggregate(**sums), [])]
    columns = [f"g_{name}" for name in group_by]
    rows = (
        source.annotate(**{f"g_{name}": groups[name] for name in group_by})
        .values(*columns)
        .annotate(**sums)
        .order_by(*columns)
    )
    return [_group(row, list(group_by)) for row in rows]


def _group(row: dict[str, Any], group_by: list[str]) -> dict[str, Any]:
    group: dict[str, Any] = {name: row[f"g_{name}"] for name in group_by}
    if group.get("day") is not None:
        group["day"] = group["day"].isoformat()
    group.update(
        # Sums over no rows are None (the roll-up's counts are sums too): they are 0.
        calls=row["calls"] or 0,
        billedCalls=row["billed_calls"] or 0,
        cacheHits=row["cache_hits"] or 0,
        errors=row["errors"] or 0,
        overBudget=row["over_budget"] or 0,
        overCost=row["over_cost"] or 0,
        overLatency=row["over_latency"] or 0,
        inputTokens=row["input_tokens"] or 0,
        outputTokens=row["output_tokens"] or 0,
        costUsd=exact(row["cost_usd"]),
    )
    return group


# ------------------------------------------------------------------ writing the ledger

#: The roll-up's counters, in the order of the upsert's columns.
DAY_COUNTERS = (
    "calls",
    "billed_calls",
    "cache_hits",
    "errors",
    "over_budget",
    "over_cost",
    "over_latency",
    "input_tokens",
    "output_tokens",
    "cost_usd",
)


def record(entries: Sequence[JudgeLedgerEntry], *, batch_size: int | None = None) -> list[JudgeLedgerEntry]:
    """Store ledger entries and add them to the daily roll-up, in one transaction.

    The one way ledger entries are written (the judge's calls, the demo): the roll-up
    (`LedgerDay`) then always equals the sums of the entries. Returns the stored entries.
    """
    with transaction.atomic():
        stored = JudgeLedgerEntry.objects.bulk_create(entries, batch_size=batch_size)
        add_to_days(stored)
    return stored


def day_counters(entry: JudgeLedgerEntry) -> tuple[Any, ...]:
    """What one entry adds to its roll-up row, in DAY_COUNTERS order (as SUMS counts it)."""
    call = not entry.cache_hit
    return (
        int(call),
        int(call and entry.billed),
        int(entry.cache_hit),
        int(call and entry.outcome == "error"),
        int(entry.over_budget_cost or entry.over_budget_latency),
        int(entry.over_budget_cost),
        int(entry.over_budget_latency),
        entry.input_tokens or 0,
        entry.output_tokens or 0,
        Decimal(entry.cost_usd or 0),
    )


def add_to_days(entries: Iterable[JudgeLedgerEntry]) -> None:
    """Add stored entries to their `LedgerDay` rows (call inside the entries' transaction).

    One upsert per row that increments (INSERT ... ON CONFLICT DO UPDATE, on PostgreSQL and
    SQLite alike), so that concurrent writers add up rather than overwrite; keys are
    written in a fixed order so that two writers never wait on each other crosswise.
    """
    deltas: dict[tuple[Any, ...], list[Any]] = defaultdict(lambda: [0] * 9 + [Decimal(0)])
    for entry in entries:
        key = (entry.tenant_id, entry.guardrail_id, entry.model_id, timezone.localdate(entry.created_at))
        for index, value in enumerate(day_counters(entry)):
            deltas[key][index] += value
    if not deltas:
        return
    with connection.cursor() as cursor:
        cursor.executemany(_UPSERT, [(*key, *values) for key, values in sorted(deltas.items())])


_DAY_TABLE = LedgerDay._meta.db_table
# Built from the model's own table and column names only; values go as parameters.
_UPSERT = (
    f"INSERT INTO {_DAY_TABLE} (tenant_id, guardrail_id, model_id, day, {', '.join(DAY_COUNTERS)}) "  # noqa: S608
    f"VALUES ({', '.join(['%s'] * (4 + len(DAY_COUNTERS)))}) "
    "ON CONFLICT (tenant_id, guardrail_id, model_id, day) DO UPDATE SET "
    + ", ".join(f"{name} = {_DAY_TABLE}.{name} + excluded.{name}" for name in DAY_COUNTERS)
)


def remove_from_days(entry: JudgeLedgerEntry) -> None:
    """Take a deleted entry out of its roll-up row (an entry deleted in the admin)."""
    key = {
        "tenant_id": entry.tenant_id,
        "guardrail_id": entry.guardrail_id,
        "model_id": entry.model_id,
        "day": timezone.localdate(entry.created_at),
    }
    LedgerDay.objects.filter(**key).update(
        **{name: F(name) - value for name, value in zip(DAY_COUNTERS, day_counters(entry), strict=True)}
    )


def remove_many_from_days(entries: Iterable[JudgeLedgerEntry]) -> None:
    """Take entries about to be deleted out of their roll-up rows: one update per row
    (retention deletes a batch of entries at a time)."""
    deltas: dict[tuple[Any, ...], list[Any]] = defaultdict(lambda: [0] * 9 + [Decimal(0)])
    for entry in entries:
        key = (entry.tenant_id, entry.guardrail_id, entry.model_id, timezone.localdate(entry.created_at))
        for index, value in enumerate(day_counters(entry)):
            deltas[key][index] += value
    for (tenant_id, guardrail_id, model_id, day), values in sorted(deltas.items()):
        LedgerDay.objects.filter(tenant_id=tenant_id, guardrail_id=guardrail_id, model_id=model_id, day=day).update(
            **{name: F(name) - value for name, value in zip(DAY_COUNTERS, values, strict=True)}
        )


def rebuild_days() -> int:
    """Fill the roll-up again from every entry (after entries were written around `record`,
    as a bulk load does); returns the number of roll-up rows."""
    rows: Iterable[Mapping[str, Any]] = (
        JudgeLedgerEntry.objects.order_by()
        .annotate(g_day=TruncDate("created_at"))
        .values("tenant_id", "guardrail_id", "model_id", "g_day")
        .annotate(**SUMS)
    )
    with transaction.atomic():
        LedgerDay.objects.all().delete()
        created = LedgerDay.objects.bulk_create(
            [
                LedgerDay(
                    tenant_id=row["tenant_id"],
                    guardrail_id=row["guardrail_id"],
                    model_id=row["model_id"],
                    day=row["g_day"],
                    **{name: row[name] or 0 for name in DAY_COUNTERS},
                )
                for row in rows
            ],
            batch_size=1000,
        )
    return len(created)


#: The columns of a summary after its group names, in the API's order (the sums CSV header).
SUMMARY_COLUMNS = (
    "calls",
    "billedCalls",
    "cacheHits",
    "errors",
    "overBudget",
    "overCost",
    "overLatency",
    "inputTokens",
    "outputTokens",
    "costUsd",
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
        tenant_slug=F("tenant__slug"), guardrail_ref=F("guardrail__guardrail_id"), revision_number=F("revision__number")
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
    "createdAt",
    "tenant",
    "guardrail",
    "revision",
    "trace",
    "evaluation",
    "model",
    "provider",
    "modelName",
    "inputTokens",
    "outputTokens",
    "costUsd",
    "latencyMs",
    "outcome",
    "verdict",
    "score",
    "reason",
    "error",
    "billed",
    "attempts",
    "cacheHit",
    "overBudgetCost",
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
