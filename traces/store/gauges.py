"""What `/metrics` reads when it is scraped: the state of the queues and of the work
waiting in rows, which no process counts as it goes (a prometheus-client collector).

Each read is small and bounded, so that a scrape every 15 s costs the database little:
counts stop at `COUNT_CAP` (a `LIMIT` under the count) and use the indexes on `status` and
`lease_until`; the oldest outbox batch is found by primary key; the queues are one
pipelined `LLEN` per queue on Redis, or one listing of the filesystem broker's folder. A
part that cannot be read (Redis down) leaves its metrics out of that scrape, and
`kindgi_scrape_errors` says which.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import Any

import redis
from django.conf import settings
from django.db.models import Min, QuerySet
from django.utils import timezone
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from kindgi_console import replicas
from kindgi_console.jobs import ACTIVE, Status
from kindgi_console.paging import bounded_count
from traces.judge.circuit import circuits_of
from traces.judge.registry import registered_models
from traces.models import Evaluation, EvaluationChunk, PendingRuntimeEvaluation, Upload, WorkerHeartbeat

logger = logging.getLogger(__name__)

#: A count stops here: the gauge then says "at least this many", which is enough to alert on.
COUNT_CAP = 100_000
#: Failed runs and uploads are counted over this many last seconds (the index's second column).
FAILED_WINDOW_S = 24 * 3600
#: kombu's Redis transport keeps a queue's messages of priority 3, 6 and 9 in lists of their own.
REDIS_PRIORITY_SUFFIXES = ("", "\x06\x163", "\x06\x166", "\x06\x169")
CIRCUIT_STATES = ("closed", "half-open", "open")


def capped_count(rows: QuerySet[Any]) -> int:
    return bounded_count(rows, COUNT_CAP).value


def age_of(instant: datetime | None, now: datetime) -> float:
    return 0.0 if instant is None else max(0.0, (now - instant).total_seconds())


def queue_depths() -> dict[str, int]:
    """Messages waiting in each of the console's Celery queues."""
    broker = settings.CELERY_BROKER_URL
    queues = list(settings.KINDGI_QUEUES.values())
    if broker.startswith(("redis://", "rediss://")):
        client = redis.Redis.from_url(broker, socket_connect_timeout=1, socket_timeout=1)
        try:
            pipe = client.pipeline(transaction=False)
            for queue in queues:
                for suffix in REDIS_PRIORITY_SUFFIXES:
                    pipe.llen(queue + suffix)
            lengths = pipe.execute()
        finally:
            client.close()
        per = len(REDIS_PRIORITY_SUFFIXES)
        return {queue: sum(lengths[i * per : (i + 1) * per]) for i, queue in enumerate(queues)}
    folder = str(settings.CELERY_BROKER_TRANSPORT_OPTIONS["data_folder_in"])
    depths = dict.fromkeys(queues, 0)
    endings = {f".{queue}.msg": queue for queue in queues}
    with os.scandir(folder) as entries:
        for entry in entries:
            found = endings.get("." + entry.name.split(".", 1)[-1])
            if found is not None:
                depths[found] += 1
    return depths


def jobs_by_status(model: type[Evaluation] | type[Upload], now: datetime) -> dict[str, int]:
    """Queued and running jobs of a kind, and those failed in the last FAILED_WINDOW_S."""
    since = now - timedelta(seconds=FAILED_WINDOW_S)
    counts: dict[str, int] = {status: capped_count(model.objects.filter(status=status)) for status in ACTIVE}
    counts[Status.FAILED] = capped_count(model.objects.filter(status=Status.FAILED, created_at__gte=since))
    return counts


def oldest_leases(now: datetime) -> dict[str, float]:
    """Per kind of leased work, how long ago the oldest unfinished lease ran out (0: none has)."""
    chunk = EvaluationChunk.objects.filter(status__in=ACTIVE).aggregate(oldest=Min("lease_until"))["oldest"]
    upload = Upload.objects.filter(status__in=ACTIVE).aggregate(oldest=Min("lease_until"))["oldest"]
    outbox = PendingRuntimeEvaluation.objects.aggregate(oldest=Min("lease_until"))["oldest"]
    return {"chunk": age_of(chunk, now), "upload": age_of(upload, now), "outbox": age_of(outbox, now)}


class ConsoleGauges(Collector):
    """The gauges read at scrape time; each part failing alone."""

    def collect(self) -> Iterator[Metric]:
        errors = GaugeMetricFamily(
            "kindgi_scrape_errors", "Parts of the scrape that could not be read", labels=["part"]
        )
        for part, read in (
            ("queues", self._queues),
            ("outbox", self._outbox),
            ("jobs", self._jobs),
            ("leases", self._leases),
            ("circuits", self._circuits),
            ("heartbeats", self._heartbeats),
            ("replicas", self._replicas),
        ):
            try:
                yield from read(timezone.now())
                errors.add_metric([part], 0)
            except Exception:  # one part down (Redis, the database) leaves the others readable
                logger.warning("metrics: could not read %s", part, exc_info=True)
                errors.add_metric([part], 1)
        yield errors

    def _replicas(self, now: datetime) -> Iterator[Metric]:
        if not settings.REPLICA_ALIASES:
            return
        lag = GaugeMetricFamily(
            "kindgi_replica_lag_seconds", "How far each read replica is behind the primary", labels=["replica"]
        )
        serving = GaugeMetricFamily(
            "kindgi_replica_serving",
            "1 while a read replica serves reads (reachable, not too far behind)",
            labels=["replica"],
        )
        for state in replicas.states():
            if state.lag_s is not None:
                lag.add_metric([state.alias], state.lag_s)
            serving.add_metric([state.alias], 1 if state.usable else 0)
        yield lag
        yield serving

    def _queues(self, now: datetime) -> Iterator[Metric]:
        gauge = GaugeMetricFamily("kindgi_queue_messages", "Messages waiting in each Celery queue", labels=["queue"])
        for queue, depth in queue_depths().items():
            gauge.add_metric([queue], depth)
        yield gauge

    def _outbox(self, now: datetime) -> Iterator[Metric]:
        pending = PendingRuntimeEvaluation.objects
        oldest = pending.order_by("pk").values_list("created_at", flat=True).first()
        yield GaugeMetricFamily(
            "kindgi_outbox_batches",
            "Ingested batches whose runtime evaluation is not done",
            value=capped_count(pending.all()),
        )
        yield GaugeMetricFamily(
            "kindgi_outbox_oldest_age_seconds",
            "Age of the oldest batch in the outbox (0: empty)",
            value=age_of(oldest, now),
        )

    def _jobs(self, now: datetime) -> Iterator[Metric]:
        for name, model, what in (
            ("kindgi_evaluation_runs", Evaluation, "Evaluation runs"),
            ("kindgi_uploads", Upload, "Uploads"),
        ):
            gauge = GaugeMetricFamily(name, f"{what} queued, running, and failed in the last 24 h", labels=["status"])
            for status, count in jobs_by_status(model, now).items():
                gauge.add_metric([str(status)], count)
            yield gauge

    def _leases(self, now: datetime) -> Iterator[Metric]:
        gauge = GaugeMetricFamily(
            "kindgi_oldest_lease_overdue_seconds",
            "How long ago the oldest unfinished lease of each kind ran out (0: none has)",
            labels=["kind"],
        )
        for kind, age in oldest_leases(now).items():
            gauge.add_metric([kind], age)
        yield gauge

    def _circuits(self, now: datetime) -> Iterator[Metric]:
        models = registered_models()
        gauge = GaugeMetricFamily(
            "kindgi_judge_circuit_state",
            "Each judge model's circuit: 1 for its current state",
            labels=["model", "state"],
        )
        for model, view in zip(models, circuits_of(models), strict=True):
            for state in CIRCUIT_STATES:
                gauge.add_metric([model.id, state], 1 if view.status == state else 0)
        yield gauge

    def _heartbeats(self, now: datetime) -> Iterator[Metric]:
        gauge = GaugeMetricFamily(
            "kindgi_heartbeat_age_seconds",
            "Seconds since each worker's (and beat's) last heartbeat",
            labels=["hostname"],
        )
        for hostname, seen in WorkerHeartbeat.objects.order_by("hostname").values_list("hostname", "seen_at")[:1000]:
            gauge.add_metric([hostname], age_of(seen, now))
        yield gauge
