"""The leases of an evaluation run's chunks: how long a worker is trusted, its heartbeat,
and which chunks lost their worker or their message.
"""

from __future__ import annotations

import logging
import threading
from datetime import datetime, timedelta

from django.conf import settings
from django.db import DatabaseError, connections
from django.db.models import Exists, OuterRef, Q
from django.utils import timezone

from traces.models import Evaluation, EvaluationChunk

logger = logging.getLogger(__name__)


def lease() -> timedelta:
    """How long a queued chunk's message (or an upload's worker) is trusted before it is sent again."""
    return timedelta(seconds=settings.KINDGI_QUEUED_LEASE_SECONDS)


def chunk_lease() -> timedelta:
    """How long a running chunk's worker is trusted without a heartbeat (`LeaseKeeper`)."""
    return timedelta(seconds=settings.KINDGI_CHUNK_LEASE_SECONDS)


def renew_lease(chunk_id: int) -> bool:
    """Keep the claim on a chunk still running; False once the run was cancelled."""
    return bool(
        EvaluationChunk.objects.filter(pk=chunk_id, status=EvaluationChunk.Status.RUNNING).update(
            lease_until=timezone.now() + chunk_lease()
        )
    )


class LeaseKeeper:
    """A heartbeat: renews a chunk's lease every third of KINDGI_CHUNK_LEASE_SECONDS while
    the chunk is evaluated, from a thread of the worker process that holds it.

    A worker that is killed stops renewing, and its chunk is sent again once the short
    lease has run out; a worker that is slow (judge calls) keeps its chunk. The thread
    uses its own database connection and closes it when the chunk ends.
    """

    def __init__(self, chunk_id: int) -> None:
        self.chunk_id = chunk_id
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, name=f"lease-{chunk_id}", daemon=True)

    def __enter__(self) -> LeaseKeeper:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _beat(self) -> None:
        interval = settings.KINDGI_CHUNK_LEASE_SECONDS / 3
        try:
            while not self._stop.wait(interval):
                try:
                    renew_lease(self.chunk_id)
                except DatabaseError:
                    logger.warning("could not renew the lease of chunk %s", self.chunk_id, exc_info=True)
        finally:
            connections.close_all()  # this thread's connections only


def lost_chunks(now: datetime) -> list[tuple[int, datetime | None]]:
    """(key, lease) of the chunks of running runs whose worker or message was lost.

    A running chunk whose lease expired lost its worker (no heartbeat). A queued chunk
    lost its message when its lease expired, or sooner when it was overtaken: a later
    chunk of its run was claimed more than a chunk lease after it was sent (the queue is
    first in, first out, so its message went to a worker that was lost before taking it).
    """
    later_claimed = EvaluationChunk.objects.filter(
        evaluation_id=OuterRef("evaluation_id"), number__gt=OuterRef("number"), attempts__gt=0
    )
    queued = EvaluationChunk.Status.QUEUED
    lost = Q(status__in=[queued, EvaluationChunk.Status.RUNNING], lease_until__lt=now) | Q(
        Exists(later_claimed), status=queued, lease_until__lt=now + lease() - chunk_lease()
    )
    chunks = EvaluationChunk.objects.filter(lost, evaluation__status=Evaluation.Status.RUNNING)
    return list(chunks.order_by("pk").values_list("pk", "lease_until"))
