"""Leased jobs: work that is claimed, leased, renewed and recovered, in one vocabulary.

Every kind of background work whose state lives in a row (a run's chunks, uploads, the
outbox of runtime evaluation, alert deliveries) is made of the same parts, defined here:

- `Job`: a `status` from one vocabulary (`Status`), which the pages and the front end read
  (`vocabulary()`: each value says whether it is final).
- `Leased`: `lease_until`, until when the worker that holds the row (or the message that
  carries it) is trusted, and `attempts`.
- `claim`: take rows that no one holds, atomically: `SELECT … FOR UPDATE SKIP LOCKED` on
  PostgreSQL (two workers never wait for each other, nor take the same row), a
  conditional UPDATE per row elsewhere (SQLite writes one at a time).
- `renew`: a worker that still holds its rows keeps them.
- `requeue_expired`: rows whose lease ran out (their worker or their message was lost)
  are queued again, each by one checker only, and sent.
- A registry of recoverers: each kind registers the function that sends its lost work
  again (`recoverer`); the periodic recovery calls them all (`recover_all`), so that no
  kind's module reaches into another's.

What each kind does with them (how many attempts, what a worker lost too often means, in
which order) stays with the kind. This module imports no app of the console.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any, ClassVar, Protocol, TypeVar

from django.db import connections, models, transaction
from django.db.models import F, Q, QuerySet
from django.http import HttpRequest
from django.utils import timezone

logger = logging.getLogger(__name__)


class Status(models.TextChoices):
    """Where a job is: waiting for a worker, held by one, or ended (the last three)."""

    QUEUED = "queued"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"


#: The statuses a job ends in: it changes no more, a page stops polling it.
FINAL = (Status.SUCCEEDED, Status.FAILED, Status.CANCELLED)
#: The statuses of a job that waits for a worker or is held by one.
ACTIVE = (Status.QUEUED, Status.RUNNING)


def vocabulary() -> list[dict[str, Any]]:
    """The statuses as the front end reads them: value, label and whether it is final."""
    return [{"value": value, "label": label, "final": value in FINAL} for value, label in Status.choices]


def template_context(request: HttpRequest) -> dict[str, Any]:
    """A context processor: `job_statuses`, which the base template serves as JSON."""
    return {"job_statuses": vocabulary()}


class Job(models.Model):
    """A row that records a job's state: its `status`, from the one vocabulary."""

    #: The vocabulary, also as `Model.Status` (`Upload.Status.RUNNING`).
    Status = Status
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.QUEUED)

    FINAL: ClassVar[tuple[str, ...]] = FINAL

    class Meta:
        abstract = True

    @property
    def is_final(self) -> bool:
        return self.status in FINAL


class _Counted(Protocol):
    @property
    def status(self) -> str: ...

    @property
    def done(self) -> int: ...

    @property
    def total(self) -> int: ...


class Progress:
    """How far a job with `done` out of `total` has got, in percent (100 once final)."""

    @property
    def percent(self: _Counted) -> int:
        if self.total == 0:
            return 100 if self.status in FINAL else 0
        return min(100, self.done * 100 // self.total)


class Leased(models.Model):
    """A row a worker holds for a while: `lease_until`, and how many `attempts` it had.

    A row with no live lease may be claimed; a claim gives it a lease and counts an attempt.
    """

    lease_until = models.DateTimeField(
        null=True, blank=True, help_text="until when its worker (or the message sent for it) is trusted"
    )
    attempts = models.PositiveIntegerField(default=0)

    class Meta:
        abstract = True

    @classmethod
    def claimable(cls, now: datetime) -> Q:
        return Q(lease_until__isnull=True) | Q(lease_until__lt=now)

    @classmethod
    def claimed(cls, now: datetime, lease: timedelta) -> dict[str, Any]:
        return {"lease_until": now + lease, "attempts": F("attempts") + 1}

    @classmethod
    def held(cls) -> Q:
        return Q()

    @classmethod
    def expired(cls, now: datetime) -> Q:
        return Q(lease_until__lt=now)

    @classmethod
    def sent_before(cls, moment: datetime, lease: timedelta) -> Q:
        """Rows whose message was sent before `moment` (a message's lease starts as it is sent)."""
        return Q(lease_until__lt=moment + lease)

    @classmethod
    def requeued(cls, now: datetime, lease: timedelta) -> dict[str, Any]:
        return {"lease_until": now + lease}


class LeasedJob(Job, Leased):
    """A job a worker claims: `queued` (its message's lease) or `running` (its worker's).

    A queued job, or a running one whose worker's lease ran out, may be claimed.
    """

    class Meta:
        abstract = True

    @classmethod
    def claimable(cls, now: datetime) -> Q:
        return Q(status=Status.QUEUED) | Q(status=Status.RUNNING, lease_until__lt=now)

    @classmethod
    def claimed(cls, now: datetime, lease: timedelta) -> dict[str, Any]:
        return {**super().claimed(now, lease), "status": Status.RUNNING}

    @classmethod
    def held(cls) -> Q:
        return Q(status=Status.RUNNING)

    @classmethod
    def expired(cls, now: datetime) -> Q:
        return Q(status__in=ACTIVE, lease_until__lt=now)

    @classmethod
    def sent_before(cls, moment: datetime, lease: timedelta) -> Q:
        return Q(status=Status.QUEUED) & super().sent_before(moment, lease)

    @classmethod
    def requeued(cls, now: datetime, lease: timedelta) -> dict[str, Any]:
        return {**super().requeued(now, lease), "status": Status.QUEUED}


L = TypeVar("L", bound=Leased)


def take(rows: QuerySet[L], *, limit: int | None = None, **changes: Any) -> list[int]:
    """Change up to `limit` of `rows` (in their order) that no one else is changing; the
    primary keys of those this call changed.

    On PostgreSQL the rows are locked with `FOR UPDATE SKIP LOCKED` (only the leased table's:
    a join to another row locks nothing there), so two callers take disjoint rows and
    neither waits. Elsewhere each row is changed by an UPDATE that repeats the condition, so
    of two callers only one changes it.
    """
    if not rows.ordered:
        rows = rows.order_by("pk")
    connection = connections[rows.db]
    if connection.features.has_select_for_update_skip_locked:
        with transaction.atomic(using=rows.db):
            locked = rows.select_for_update(skip_locked=True, of=("self",))
            pks = list(locked.values_list("pk", flat=True)[:limit])
            if pks:
                rows.model._default_manager.using(rows.db).filter(pk__in=pks).update(**changes)
        return pks
    candidates = list(rows.values_list("pk", flat=True)[:limit])
    return [pk for pk in candidates if rows.filter(pk=pk).update(**changes)]


def claim(rows: QuerySet[L], *, lease: timedelta, limit: int = 1, **changes: Any) -> list[int]:
    """Claim up to `limit` of `rows` that no one holds (`claimable`) for `lease`: an attempt
    more, `running` for a job; with `changes` too. The primary keys claimed."""
    now = timezone.now()
    model = rows.model
    return take(rows.filter(model.claimable(now)), limit=limit, **model.claimed(now, lease), **changes)


def renew(rows: QuerySet[L], *, lease: timedelta, **changes: Any) -> bool:
    """Keep holding `rows` for `lease` from now (with `changes`); False when none is held any
    more (a job no longer running: cancelled, failed, or taken over)."""
    held = rows.filter(rows.model.held())
    return bool(held.update(lease_until=timezone.now() + lease, **changes))


def release(rows: QuerySet[L], *, lease: timedelta, **changes: Any) -> bool:
    """Hand `rows` still held back to the queue, with a `lease` for the message that carries
    them on (a job read in pieces, one task each); False when none was held any more."""
    model = rows.model
    return bool(rows.filter(model.held()).update(**model.requeued(timezone.now(), lease), **changes))


def requeue_expired(
    rows: QuerySet[L],
    *,
    lease: timedelta,
    send: Callable[[int], bool | None],
    now: datetime | None = None,
    lost_before: datetime | None = None,
    also: Q | None = None,
    limit: int = 10_000,
    count_resends: bool = False,
) -> int:
    """Queue again the `rows` whose lease ran out, with a new `lease` for the message that
    `send` sends for each; how many were sent.

    `lost_before`: the broker may have lost every message sent before then, so the rows
    queued before it are sent again too. `also`: what else the kind counts as lost. Each
    row is taken by one checker only. A `send` that answers False (the broker cannot be
    reached) stops the round: the rows not taken stay due. `count_resends`: a row whose
    lease ran out counts an attempt once it is sent (a kind whose worker does not claim).
    """
    now = now or timezone.now()
    model = rows.model
    lost = model.expired(now)
    if also is not None:
        lost |= also
    if lost_before is not None:
        lost |= model.sent_before(min(lost_before, now), lease)
    changes = model.requeued(now, lease)
    sent = 0
    for pk, lease_until in list(rows.filter(lost).order_by("pk").values_list("pk", "lease_until")[:limit]):
        if not take(rows.filter(lost, pk=pk), **changes):
            continue
        if send(pk) is False:
            break
        if count_resends and lease_until is not None and lease_until < now:
            model._default_manager.filter(pk=pk).update(attempts=F("attempts") + 1)
        sent += 1
    return sent


def fail(rows: QuerySet[L], **changes: Any) -> int:
    """End `rows` that are still active as failed (their reason in `changes`): no lease."""
    return rows.filter(status__in=ACTIVE).update(status=Status.FAILED, lease_until=None, **changes)


def exhausted(attempts: int, limit: int) -> bool:
    """Whether a job claimed for its `attempts`-th time has had more than `limit` tries
    (each lost its worker): the kind then fails it with the reason, instead of killing
    workers forever."""
    return attempts > limit


# ---------------------------------------------------------------------------- recovery

#: lost_before (the broker may have lost every message sent before then) -> how many were sent again.
Recoverer = Callable[[datetime | None], int]

_recoverers: dict[str, Recoverer] = {}


R = TypeVar("R", bound=Recoverer)


def recoverer(kind: str) -> Callable[[R], R]:
    """Register the function that sends `kind`'s lost work again (a decorator)."""

    def register(function: R) -> R:
        _recoverers[kind] = function
        return function

    return register


def recoverers() -> dict[str, Recoverer]:
    return dict(_recoverers)


def recover_all(lost_before: datetime | None = None) -> dict[str, int]:
    """Run every registered kind's recovery; how many of each were sent again.

    `lost_before`: the broker may have lost every message sent before then.
    """
    now = timezone.now()
    lost_before = None if lost_before is None else min(lost_before, now)
    return {kind: function(lost_before) for kind, function in sorted(_recoverers.items())}
