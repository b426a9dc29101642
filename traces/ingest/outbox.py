"""The outbox of runtime evaluation: no stored trace loses its evaluation to a broker fault.

Ingestion (REST and uploads) stores each batch with a `PendingRuntimeEvaluation` row in
the same transaction, and sends its task once that commits. A broker that cannot be
reached then costs the request nothing: the traces are stored, the answer is the usual
one, and the periodic check (`send_pending`) sends the batch again once it is back. The
task deletes the row when the batch is evaluated; evaluating a batch twice stores
nothing twice (results are unique per trace and revision).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from datetime import datetime

from django.conf import settings
from django.db import transaction
from django.db.models import F, Q
from django.utils import timezone
from kombu.exceptions import OperationalError as BrokerError

from kindgi_console import tasking
from traces.models import PendingRuntimeEvaluation
from traces.store.leases import lease, sent_before

logger = logging.getLogger(__name__)

#: What sending a task raises when the broker cannot be reached.
UNREACHABLE = (BrokerError, OSError)


def queue_runtime_evaluation(trace_ids: Sequence[int]) -> None:
    """Record the batch in the outbox (in the caller's transaction); send it after commit."""
    ids = list(trace_ids)
    if not ids:
        return
    pending = PendingRuntimeEvaluation.objects.create(trace_ids=ids, lease_until=timezone.now() + lease())
    transaction.on_commit(lambda: send(pending.pk, ids))


class BrokerPause:
    """After a send failed, this process stops trying for a while: each try costs seconds
    of connection attempts, and the outbox keeps what was not sent."""

    seconds = 30.0

    def __init__(self) -> None:
        self.until = 0.0

    def active(self) -> bool:
        return time.monotonic() < self.until

    def start(self) -> None:
        self.until = time.monotonic() + self.seconds

    def end(self) -> None:
        self.until = 0.0


PAUSE = BrokerPause()


def send(pending_id: int, trace_ids: list[int], *, force: bool = False) -> bool:
    """Send the batch's task; when the broker cannot be reached, leave it to the periodic check."""
    if PAUSE.active() and not force:
        return _wait_for_the_check(pending_id)
    try:
        tasking.send("traces.tasks.evaluate_ingested", trace_ids, kwargs={"pending_id": pending_id}, retry=False)
    except UNREACHABLE as error:
        logger.warning("runtime evaluation of %d stored traces waits for the broker: %s", len(trace_ids), error)
        PAUSE.start()
        return _wait_for_the_check(pending_id)
    PAUSE.end()
    return True


def _wait_for_the_check(pending_id: int) -> bool:
    """Due at once: the periodic check sends it when the broker is back."""
    PendingRuntimeEvaluation.objects.filter(pk=pending_id).update(lease_until=timezone.now())
    return False


def done(pending_id: int | None) -> None:
    """The batch is evaluated: out of the outbox."""
    if pending_id is not None:
        PendingRuntimeEvaluation.objects.filter(pk=pending_id).delete()


def send_pending(now: datetime | None = None, limit: int = 10_000, lost_before: datetime | None = None) -> int:
    """Send again the batches whose task was never sent or was lost, and those sent before
    `lost_before` (the broker may have lost their message); how many were sent.

    A batch is sent again KINDGI_CHUNK_MAX_ATTEMPTS times after its lease ran out (its
    evaluation keeps failing); a broker that lost its message does not count.
    """
    now = now or timezone.now()
    due = Q(lease_until__lt=now)
    if lost_before is not None:
        due |= Q(lease_until__lt=sent_before(min(lost_before, now)))
    sent = 0
    rows = PendingRuntimeEvaluation.objects.filter(due, resent__lt=settings.KINDGI_CHUNK_MAX_ATTEMPTS).order_by("pk")
    for pending_id, trace_ids, lease_until in list(rows.values_list("pk", "trace_ids", "lease_until")[:limit]):
        # The new lease covers the message now on its way; only one check sends it.
        if PendingRuntimeEvaluation.objects.filter(due, pk=pending_id).update(lease_until=now + lease()):
            if not send(pending_id, trace_ids, force=True):
                break
            if lease_until < now:
                PendingRuntimeEvaluation.objects.filter(pk=pending_id).update(resent=F("resent") + 1)
            sent += 1
    return sent
