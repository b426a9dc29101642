"""The leases of an evaluation run's chunks: how long a worker is trusted, its heartbeat,
and which chunks lost their worker or their message, or whose broker lost its messages.
"""

from __future__ import annotations

import logging
import threading
from datetime import datetime, timedelta

from django.conf import settings
from django.db import DatabaseError, connections
from django.db.models import Exists, OuterRef, Q
from django.utils import timezone
from kombu.exceptions import OperationalError as BrokerError

from traces.models import Evaluation, EvaluationChunk

logger = logging.getLogger(__name__)

#: A key the recovery check keeps in the broker beside the queues (a Redis database).
BROKER_SENTINEL = "kindgi.broker-kept:{queue}"


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


def sent_before(moment: datetime) -> datetime:
    """The time before which the lease of a message sent before `moment` ends: a queued
    chunk's, upload's or outbox batch's lease is given as its message is sent."""
    return moment + lease()


def lost_chunks(now: datetime, lost_before: datetime | None = None) -> list[tuple[int, datetime | None]]:
    """(key, lease) of the chunks of running runs whose worker or message was lost.

    A running chunk whose lease expired lost its worker (no heartbeat). A queued chunk
    lost its message when its lease expired, or sooner when it was overtaken: a later
    chunk of its run was claimed more than a chunk lease after it was sent (the queue is
    first in, first out, so its message went to a worker that was lost before taking it).
    `lost_before`: the broker may have lost every message sent before then (it restarted,
    or a worker lost its connection), so a queued chunk sent before it is lost too.
    """
    later_claimed = EvaluationChunk.objects.filter(
        evaluation_id=OuterRef("evaluation_id"), number__gt=OuterRef("number"), attempts__gt=0
    )
    queued = EvaluationChunk.Status.QUEUED
    lost = Q(status__in=[queued, EvaluationChunk.Status.RUNNING], lease_until__lt=now) | Q(
        Exists(later_claimed), status=queued, lease_until__lt=now + lease() - chunk_lease()
    )
    if lost_before is not None:
        lost |= Q(status=queued, lease_until__lt=sent_before(lost_before))
    chunks = EvaluationChunk.objects.filter(lost, evaluation__status=Evaluation.Status.RUNNING)
    return list(chunks.order_by("pk").values_list("pk", "lease_until"))


def broker_lost_its_messages() -> bool:
    """Whether the broker lost what it held since this was last asked: a Redis restarted
    without persistence, flushed or replaced has lost the key this keeps beside the queues
    (set again at once, so only one check answers yes). The filesystem transport keeps
    its messages in files; a broker that cannot be reached tells nothing (False)."""
    from kindgi_console.celery import app

    with app.connection_for_write() as conn:
        if conn.transport.driver_type != "redis":
            return False
        key = BROKER_SENTINEL.format(queue=settings.CELERY_TASK_DEFAULT_QUEUE)
        try:
            conn.ensure_connection(max_retries=1)
            return bool(conn.default_channel.client.set(key, timezone.now().isoformat(), nx=True))
        except (BrokerError, *conn.connection_errors, *conn.channel_errors) as error:
            logger.warning("could not tell whether the broker kept its messages: %s", error)
            return False
