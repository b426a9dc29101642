"""Computing a comparison (the task `traces.tasks.compare_runs`): each guardrail revision of a
run compared, trace by trace, with the earlier result of that guardrail on the trace.

A trace's *earlier result* for a guardrail is, by default, its latest `pass` or `fail` of the
guardrail (any revision, in shadow or not) stored before the run was created, by another run
or at the runtime (of a turn checked by stages, its latest stage's verdict); compared with one
run (`RunComparison.other`), that run's. So each guardrail is compared with its own past,
whichever run last evaluated it: a run of 14 guardrails is not compared over the 2 an older
run happened to share. Over the traces the run passed or failed:

- *newly failing*: fails now, passed before; *no longer failing*: passes now, failed before;
  *still failing*: failed both times (each trace kept as a `ComparisonChange`, with the
  earlier result's run and revision);
- *not compared*, counted with its reason: no earlier result of the guardrail on the trace,
  or no verdict in this run (skipped by scope, or an error). A guardrail none of whose
  traces could be compared says why, and earlier results of another revision are noted.

Bounded on large tables: the run's results are read a batch at a time, by ranges of id in
the index `result_run_key` (evaluation, status, guardrail, id), and each trace's earlier
result is one probe of the results' unique key, which leads with (trace, revision): one
range per revision of the guardrail, never a scan of the tenant's results. Each batch is two
statements (counting what it found; keeping the changed traces, skipped when none changed),
so the task's progress moves per batch and no statement holds more than a batch.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from django.db import connection, transaction
from django.utils import timezone

from guardrails.models import GuardrailRevision
from traces.models import ComparisonChange, Evaluation, EvaluationResult, RunComparison

Kind = ComparisonChange.Kind
#: Results of a run read per batch (statements stay bounded whatever the run's size).
BATCH = 5000
#: Earlier sources (a run, or the runtime, at a revision) named per guardrail, the largest first.
SOURCES_LISTED = 5
_LAST_ID = 2**63 - 1

_RESULTS = EvaluationResult._meta.db_table
_CHANGES = ComparisonChange._meta.db_table
_REVISIONS = GuardrailRevision._meta.db_table


@dataclass(frozen=True)
class Target:
    """A revision the run evaluated, as compared: its guardrail, and whether it ran in shadow."""

    revision: GuardrailRevision
    shadow: bool


@dataclass
class Tally:
    """What a revision's comparison has counted so far."""

    statuses: dict[str, int]
    outcomes: Counter[str] = field(default_factory=Counter)
    #: (earlier run or None for the runtime, earlier revision key) -> results compared with it
    sources: Counter[tuple[int | None, int]] = field(default_factory=Counter)


# ---------------------------------------------------------------------------- the task


def compute(comparison_id: int) -> None:
    """Compare the run's every revision, keeping the figures and the listed traces; progress
    on the row. Resumable: each batch commits its traces with the row's `position`, so a task
    stopped by its time limit (or a lost worker) is continued by the next, from that batch."""
    comparison = RunComparison.objects.select_related("evaluation", "other").filter(pk=comparison_id).first()
    if comparison is None or comparison.status == RunComparison.Status.SUCCEEDED:
        return
    run = comparison.evaluation
    targets = run_targets(run)
    position = comparison.position or _start(comparison, targets)
    RunComparison.objects.filter(pk=comparison_id).update(
        status=RunComparison.Status.RUNNING, started_at=timezone.now(), error=""
    )
    figures = list(comparison.guardrails) if comparison.position else []
    done = int(position["done"])
    for index in range(int(position["target"]), len(targets)):
        target = targets[index]
        resumed = position if index == position["target"] else {}
        tally = Tally(statuses=status_counts(run, target.revision), **_tally_of(resumed))
        for status in ("fail", "pass"):
            if not tally.statuses[status] or (resumed.get("status") == "pass" and status == "fail"):
                continue  # none, or its failures were compared before the task stopped
            after = int(resumed.get("after", 0)) if resumed.get("status", "fail") == status else 0
            done = _compare_status(comparison, Batches(index, target, tally, status), after, done)
        figures.append(revision_figures(comparison, target, tally))
        next_one = {"target": index + 1, "status": "fail", "after": 0, "done": done}
        RunComparison.objects.filter(pk=comparison_id).update(guardrails=figures, position=next_one)
    figures += only_in_other(comparison, targets)
    RunComparison.objects.filter(pk=comparison_id).update(
        guardrails=figures, status=RunComparison.Status.SUCCEEDED, finished_at=timezone.now(), position={}
    )


def _start(comparison: RunComparison, targets: list[Target]) -> dict[str, Any]:
    """A computation from the start: no kept trace, the results to compare counted."""
    total = sum(
        count
        for target in targets
        for status, count in status_counts(comparison.evaluation, target.revision).items()
        if status in ("pass", "fail")
    )
    position = {"target": 0, "status": "fail", "after": 0, "done": 0}
    with transaction.atomic():
        ComparisonChange.objects.filter(comparison=comparison).delete()
        RunComparison.objects.filter(pk=comparison.pk).update(total=total, done=0, guardrails=[], position=position)
    return position


def _tally_of(position: dict[str, Any]) -> dict[str, Any]:
    """The counts a stopped computation had made of its revision (none: from the start)."""
    return {
        "outcomes": Counter(position.get("outcomes", {})),
        "sources": Counter({(run, key): count for run, key, count in position.get("sources", [])}),
    }


def fail(comparison_id: int, error: str) -> None:
    RunComparison.objects.filter(pk=comparison_id).update(
        status=RunComparison.Status.FAILED, error=error[:2000], finished_at=timezone.now()
    )


def run_targets(run: Evaluation) -> list[Target]:
    """The run's pinned revisions by guardrail id, then number; of a guardrail pinned twice
    (in shadow beside its enforced revision), the newer ran in shadow."""
    revisions = list(run.revisions.select_related("guardrail").order_by("guardrail__guardrail_id", "number"))
    pinned = Counter(revision.guardrail_id for revision in revisions)
    newest = {revision.guardrail_id: revision.number for revision in revisions}
    return [
        Target(revision, shadow=pinned[revision.guardrail_id] > 1 and revision.number == newest[revision.guardrail_id])
        for revision in revisions
    ]


def status_counts(run: Evaluation, revision: GuardrailRevision) -> dict[str, int]:
    """The run's results of the revision per status: one range of `result_run_key` each."""
    results = EvaluationResult.objects.filter(evaluation=run, guardrail_id=revision.guardrail_id, revision=revision)
    return {status: results.filter(status=status).count() for status in EvaluationResult.Status.values}


# ---------------------------------------------------------------------------- batches


@dataclass(frozen=True)
class Batches:
    """The run's results of one revision and status, read a batch at a time."""

    index: int
    target: Target
    tally: Tally
    status: str


def _compare_status(comparison: RunComparison, batches: Batches, last: int, done: int) -> int:
    """Compare the run's results of one revision and status after id `last`, batch by batch,
    each committed with the position it reached; returns the progress."""
    revision, status, tally = batches.target.revision, batches.status, batches.tally
    while True:
        upper = _batch_end(comparison.evaluation_id, revision, status, last)
        bounds = (last, upper or _LAST_ID)
        with transaction.atomic():
            found = _count_batch(comparison, revision, status, bounds)
            if _changed(status, found):
                _keep_batch(comparison, revision, status, bounds)
            done += sum(found.values())
            for (earlier_status, earlier_revision, earlier_run), count in found.items():
                tally.outcomes[_outcome(status, earlier_status)] += count
                if earlier_revision is not None:
                    tally.sources[(earlier_run, earlier_revision)] += count
            position = {
                "target": batches.index,
                "status": status,
                "after": upper or _LAST_ID,
                "done": done,
                "outcomes": dict(tally.outcomes),
                "sources": [[run, key, count] for (run, key), count in tally.sources.items()],
            }
            RunComparison.objects.filter(pk=comparison.pk).update(done=done, position=position)
        if upper is None:
            return done
        last = upper


def _batch_end(run_id: int, revision: GuardrailRevision, status: str, after: int) -> int | None:
    """The id of the BATCH-th result after `after` (None: the rest is the last batch)."""
    ids = (
        EvaluationResult.objects.filter(
            evaluation_id=run_id, status=status, guardrail_id=revision.guardrail_id, revision=revision, pk__gt=after
        )
        .order_by("pk")
        .values_list("pk", flat=True)
    )
    found = list(ids[BATCH - 1 : BATCH])
    return found[0] if found else None


def _outcome(status: str, earlier: str | None) -> str:
    if earlier is None:
        return "withoutEarlier"
    if status == "fail":
        return "stillFailing" if earlier == "fail" else "newlyFailing"
    return "noLongerFailing" if earlier == "fail" else "stillPassing"


def _changed(status: str, found: dict[tuple[Any, Any, Any], int]) -> bool:
    """Whether the batch holds a trace to keep: a fail compared, or a pass that failed before."""
    return any(earlier == "fail" or (status == "fail" and earlier) for earlier, _, _ in found)


def _earlier(comparison: RunComparison, revisions: Sequence[int]) -> tuple[str, list[Any]]:
    """The subquery of a result `f`'s earlier result id, and its parameters."""
    placeholders = ", ".join(["%s"] * len(revisions))
    params: list[Any]
    if comparison.other_id is not None:
        source, params = "o.evaluation_id = %s", [comparison.other_id]
    else:
        run = comparison.evaluation
        source = "o.created_at < %s AND (o.evaluation_id IS NULL OR o.evaluation_id <> %s)"
        params = [connection.ops.adapt_datetimefield_value(run.created_at), run.pk]
    sql = (
        f"(SELECT o.id FROM {_RESULTS} o WHERE o.trace_id = f.trace_id "  # noqa: S608 (the models' table names)
        f"AND o.revision_id IN ({placeholders}) AND o.status IN ('pass', 'fail') AND {source} "
        "ORDER BY o.created_at DESC, o.id DESC LIMIT 1)"
    )
    return sql, [*revisions, *params]


def _batch(comparison: RunComparison, revision: GuardrailRevision, status: str, bounds: tuple[int, int]) -> Any:
    """The SELECT of one batch of the run's results with their earlier result's id, and its parameters."""
    revisions = list(GuardrailRevision.objects.filter(guardrail_id=revision.guardrail_id).values_list("pk", flat=True))
    earlier, params = _earlier(comparison, revisions)
    sql = (
        f"SELECT f.id, f.trace_id, f.reason, {earlier} AS earlier_id FROM {_RESULTS} f "  # noqa: S608
        "WHERE f.evaluation_id = %s AND f.status = %s AND f.guardrail_id = %s AND f.revision_id = %s "
        "AND f.id > %s AND f.id <= %s"
    )
    return sql, [*params, comparison.evaluation_id, status, revision.guardrail_id, revision.pk, *bounds]


def _count_batch(
    comparison: RunComparison, revision: GuardrailRevision, status: str, bounds: tuple[int, int]
) -> dict[tuple[Any, Any, Any], int]:
    """(earlier status, earlier revision key, earlier run) -> how many of the batch's results."""
    batch, params = _batch(comparison, revision, status, bounds)
    sql = (
        f"SELECT e.status, e.revision_id, e.evaluation_id, COUNT(*) FROM ({batch}) b "  # noqa: S608
        f"LEFT JOIN {_RESULTS} e ON e.id = b.earlier_id GROUP BY e.status, e.revision_id, e.evaluation_id"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return {(row[0], row[1], row[2]): int(row[3]) for row in cursor.fetchall()}


# The kind and the reason kept, by the status now: a fail keeps its own reason, a pass the
# earlier failure's. Literals of the code only; every value goes as a parameter.
_KEPT = {
    "fail": (
        f"CASE WHEN e.status = 'fail' THEN '{Kind.STILL_FAILING}' ELSE '{Kind.NEWLY_FAILING}' END",
        "b.reason",
        "e.status IN ('pass', 'fail')",
    ),
    "pass": (f"'{Kind.NO_LONGER_FAILING}'", "e.reason", "e.status = 'fail'"),
}


def _keep_batch(comparison: RunComparison, revision: GuardrailRevision, status: str, bounds: tuple[int, int]) -> None:
    """Keep the batch's changed and still failing traces, in one INSERT … SELECT (a hundred
    thousand of them do not travel through Python)."""
    batch, params = _batch(comparison, revision, status, bounds)
    kind, reason, kept = _KEPT[status]
    sql = (
        f"INSERT INTO {_CHANGES} (comparison_id, guardrail_id, revision_id, trace_id, kind, reason, "  # noqa: S608
        "earlier_run, earlier_revision) "
        f"SELECT %s, %s, %s, b.trace_id, {kind}, {reason}, e.evaluation_id, r.number FROM ({batch}) b "
        f"JOIN {_RESULTS} e ON e.id = b.earlier_id JOIN {_REVISIONS} r ON r.id = e.revision_id "
        f"WHERE {kept} ORDER BY b.id"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [comparison.pk, revision.guardrail_id, revision.pk, *params])


# ---------------------------------------------------------------------------- figures


def revision_figures(comparison: RunComparison, target: Target, tally: Tally) -> dict[str, Any]:
    """What the page and the API show of one revision: counts, sources, what was not compared."""
    revision, counts, outcomes = target.revision, tally.statuses, tally.outcomes
    compared = sum(outcomes[name] for name in ("newlyFailing", "noLongerFailing", "stillFailing", "stillPassing"))
    figures = {
        "guardrail": revision.guardrail.guardrail_id,
        "key": revision.guardrail_id,
        "revision": revision.number,
        "revisionKey": revision.pk,
        "shadow": target.shadow,
        "failing": counts["fail"],
        "passing": counts["pass"],
        "skipped": counts["skipped"],
        "errors": counts["error"],
        "compared": compared,
        **{name: outcomes[name] for name in ("newlyFailing", "noLongerFailing", "stillFailing", "stillPassing")},
        "withoutEarlier": outcomes["withoutEarlier"],
        "notCompared": outcomes["withoutEarlier"] + counts["skipped"] + counts["error"],
        "earlier": earlier_sources(tally),
    }
    figures["why"] = not_compared_why(comparison, figures)
    figures["notes"] = revision_notes(figures)
    return figures


def earlier_sources(tally: Tally) -> list[dict[str, Any]]:
    """The runs (None: the runtime) and revisions the traces were compared with, most first."""
    numbers = dict(
        GuardrailRevision.objects.filter(pk__in={key for _, key in tally.sources}).values_list("pk", "number")
    )
    return [
        {"run": run, "revision": numbers.get(key), "results": count}
        for (run, key), count in tally.sources.most_common(SOURCES_LISTED)
    ]


def not_compared_why(comparison: RunComparison, figures: dict[str, Any]) -> list[str]:
    """Each reason some of the revision's traces were not compared, with how many."""
    why = []
    if figures["withoutEarlier"]:
        where = f"run #{comparison.other_id}" if comparison.other_id else "an earlier run or the runtime"
        why.append(f"{figures['withoutEarlier']} with no earlier result of this guardrail (from {where})")
    if figures["skipped"]:
        why.append(f"{figures['skipped']} skipped by the guardrail's scope in this run")
    if figures["errors"]:
        why.append(f"{figures['errors']} that ended in an error in this run")
    if not figures["compared"] and not why:
        why.append("this run has no result of it")
    return why


def revision_notes(figures: dict[str, Any]) -> list[str]:
    """What a reader should know of the compared traces: another revision, a shadow one."""
    notes = []
    others = sorted({s["revision"] for s in figures["earlier"] if s["revision"] not in (None, figures["revision"])})
    if others:
        listed = ", ".join(str(number) for number in others)
        notes.append(f"compared with results of revision {listed} (this run: revision {figures['revision']})")
    if figures["shadow"]:
        notes.append("in shadow in this run: its failures are not violations")
    return notes


def only_in_other(comparison: RunComparison, targets: list[Target]) -> list[dict[str, Any]]:
    """Compared with one run: the guardrails it evaluated that this run did not, as not compared."""
    if comparison.other is None:
        return []
    mine = {target.revision.guardrail_id for target in targets}
    theirs = comparison.other.revisions.select_related("guardrail").order_by("guardrail__guardrail_id", "number")
    rows: dict[int, dict[str, Any]] = {}
    for revision in theirs:
        if revision.guardrail_id not in mine:
            rows[revision.guardrail_id] = {
                "guardrail": revision.guardrail.guardrail_id,
                "key": revision.guardrail_id,
                "revision": None,
                "revisionKey": None,
                "compared": 0,
                "why": [f"evaluated by run #{comparison.other_id} (revision {revision.number}), not by this run"],
                "notes": [],
            }
    return list(rows.values())
