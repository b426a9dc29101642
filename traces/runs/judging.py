"""Evaluating a run's batch until its chunk's time runs out, llm-judge calls several at once.

A judge call waits on the network (a tenth of a second to seconds) where a check takes
microseconds, so a batch whose guardrails include an llm-judge is evaluated a trace per
job on a `JudgingPool` of KINDGI_JUDGE_CONCURRENCY threads: that many judge calls are in
flight at once. A batch of checks only is evaluated as one, as before.

The threads open no database connection: what the judge services read and write there
(registrations, the cache and claims, the ledger) is relayed to the thread that evaluates
the chunk (`_Relay`), which runs it on its own connection while it waits for the jobs; the
HTTP calls themselves, and the checks, run on the threads.

Either way evaluation stops at the chunk's own deadline (`stop_at`, checked before each
trace): what is returned is always a prefix of the batch, the traces evaluated, so that
the chunk stores them and hands the rest back (`traces.runs.chunks.hand_back`). The pool's
jobs start in the order they were submitted, so the traces that started before the
deadline are a prefix, and each of them ends (its judge calls end by the judge's own
deadline). The task's soft time limit, raised in the evaluating thread while it waits,
stops the batch the same way: the engine, which makes any exception of a check an
`error` verdict, never sees it.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from typing import Any, cast

from celery.exceptions import SoftTimeLimitExceeded
from django.db import connection, connections
from django.utils import timezone

from guardrails.engine.evaluate import Engine, Plan
from guardrails.engine.judge import KIND as JUDGE_KIND
from guardrails.engine.judge import CircuitBreaker
from guardrails.engine.judge.circuit import CircuitState
from guardrails.engine.types import Mode
from guardrails.services import Enforced
from traces.judge.services import ConsoleJudgeServices, EvaluationServices
from traces.store import bulk
from traces.store.columns import ResultRow

_Job = tuple[Future[Any], Callable[..., Any], tuple[Any, ...]]
#: Tells a database thread of the pool to end.
_STOP: Any = object()


class JudgingPool:
    """`size` threads that run submitted jobs in the order they were submitted, until the
    pool closes (`with JudgingPool(n) as pool:`), and `database_threads` threads that run,
    beside the chunk's own thread, the database calls the jobs relay (`requests`), each on
    a connection of its own that it closes when the pool closes."""

    def __init__(self, size: int, database_threads: int = 0) -> None:
        self.size = size
        self.requests: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._jobs: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self._threads = [threading.Thread(target=self._work, name=f"judging-{n}", daemon=True) for n in range(size)]
        self._database = [
            threading.Thread(target=self._serve, name=f"judging-db-{n}", daemon=True) for n in range(database_threads)
        ]
        for thread in self._threads + self._database:
            thread.start()

    def submit(self, function: Callable[..., Any], *args: Any) -> Future[Any]:
        future: Future[Any] = Future()
        self._jobs.put((future, function, args))
        return future

    def close(self) -> None:
        for _ in self._threads:
            self._jobs.put(None)
        for _ in self._database:
            self.requests.put(_STOP)
        for thread in self._threads + self._database:
            thread.join()

    def __enter__(self) -> JudgingPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _work(self) -> None:
        try:
            while (job := self._jobs.get()) is not None:
                _run(job)
        finally:
            connections.close_all()  # this thread's connections only (it should open none)

    def _serve(self) -> None:
        try:
            while (item := self.requests.get()) is not _STOP:
                if item is not None:  # None wakes the chunk's thread: a job has ended
                    _run(item)
        finally:
            connections.close_all()  # this thread's connections only


def _run(job: _Job) -> None:
    future, function, args = job
    if not future.set_running_or_notify_cancel():
        return
    try:
        future.set_result(function(*args))
    except BaseException as error:  # handed to the thread that waits for it
        future.set_exception(error)


class _RelayedStore:
    """A CircuitStore whose reads and writes run where the relay runs database calls."""

    def __init__(self, store: Any, relay: _Relay) -> None:
        self._store = store
        self._relay = relay

    def get(self, key: str) -> CircuitState | None:
        return cast(CircuitState | None, self._relay.relayed(self._store.get, key))

    def put(self, key: str, state: CircuitState, ttl_s: float) -> None:
        self._relay.relayed(self._store.put, key, state, ttl_s)

    def claim(self, key: str, ttl_s: float) -> bool:
        return bool(self._relay.relayed(self._store.claim, key, ttl_s))

    def release(self, key: str) -> None:
        self._relay.relayed(self._store.release, key)


class _Interrupted(BaseException):
    """A relayed call cut short by the task's soft time limit: its trace is not evaluated
    (a BaseException, which the engine does not turn into an `error` verdict)."""


class _Relay:
    """The judge services as the pool's threads see them: each call that reads or writes
    the database is relayed to the chunk's own thread (`serve`) or a database thread of the
    pool, and runs on that thread's connection. The judge models of a tenant, read once, are
    kept here.

    It has no `judge` method (the strategy would take it for a bring-your-own judge).
    """

    def __init__(self, services: ConsoleJudgeServices, requests: queue.SimpleQueue[Any]) -> None:
        self._services = services
        self._owner = threading.get_ident()
        self._models: dict[str | None, Any] = {}
        self.requests = requests
        self.ended = 0
        self._lock = threading.Lock()
        breaker = services.circuit
        # The circuit's store may be the database's cache table: relayed as the rest is.
        self.circuit = None if breaker is None else CircuitBreaker(_RelayedStore(breaker.store, self), breaker.policy)

    @property
    def deadline(self) -> float:
        return self._services.deadline

    def http_client(self) -> Any:
        return self._services.http_client()

    def models_for(self, tenant: str | None) -> Any:
        if tenant not in self._models:
            self._models[tenant] = self._relayed(self._services.models_for, tenant)
        return self._models[tenant]

    def cache_get(self, key: str) -> Any:
        return self._relayed(self._services.cache_get, key)

    def cache_put(self, key: str, outcome: Any) -> None:
        self._relayed(self._services.cache_put, key, outcome)

    def record(self, *args: Any) -> None:
        self._relayed(self._services.record, *args)

    def record_cache_hit(self, *args: Any) -> None:
        self._relayed(self._services.record_cache_hit, *args)

    def claim(self, key: str, until: float) -> bool:
        return bool(self._relayed(self._services.claim, key, until))

    def release(self, key: str) -> None:
        self._relayed(self._services.release, key)

    def relayed(self, function: Callable[..., Any], *args: Any) -> Any:
        """`function(*args)` on the chunk's thread or a database thread of the pool."""
        return self._relayed(function, *args)

    def _relayed(self, function: Callable[..., Any], *args: Any) -> Any:
        if threading.get_ident() == self._owner:
            return function(*args)
        future: Future[Any] = Future()
        self.requests.put((future, function, args))
        return future.result()

    def job_ended(self) -> None:
        with self._lock:
            self.ended += 1
        self.requests.put(None)  # wakes `serve`

    def serve(self, jobs: int, stopping: threading.Event) -> None:
        """Run relayed calls until `jobs` jobs have ended.

        The task's soft time limit sets `stopping`: the jobs not started give nothing, and
        a call it cut short fails its job with `_Interrupted`."""
        while self.ended < jobs:
            try:
                item = self.requests.get(timeout=0.05)
            except queue.Empty:
                continue
            except SoftTimeLimitExceeded:
                stopping.set()
                continue
            if item is None:
                continue
            if item is _STOP:  # not ours: the pool's database thread takes it
                self.requests.put(item)
                continue
            future, function, args = item
            if not future.set_running_or_notify_cancel():
                continue
            try:
                future.set_result(function(*args))
            except SoftTimeLimitExceeded:
                stopping.set()
                future.set_exception(_Interrupted())
            except BaseException as error:  # raised in the thread that asked
                future.set_exception(error)


def judges(targets: Sequence[Enforced]) -> bool:
    """Whether any of a run's guardrails is an llm-judge."""
    return any(target.guardrail.kind == JUDGE_KIND for target in targets)


def pool_for(targets: Sequence[Enforced], concurrency: int) -> JudgingPool | None:
    """A pool for a chunk of these guardrails (one thread at least, so that the task's soft
    limit reaches the chunk and not a judge call); None when nothing is judged.

    Its database calls run on the chunk's connection and, but in a transaction that other
    connections could not see (a test's), on up to three more: one per four threads.
    """
    if not judges(targets):
        return None
    database_threads = 0 if connection.in_atomic_block else min(3, max(0, concurrency // 4 - 1))
    return JudgingPool(max(1, concurrency), database_threads)


def evaluate_until(
    engine: Engine,
    targets: Sequence[Enforced],
    traces: Sequence[bulk.StoredTrace],
    mode: Mode,
    evaluation_id: int,
    services: EvaluationServices,
    *,
    stop_at: float,
    pool: JudgingPool | None = None,
) -> tuple[list[ResultRow], int, bool]:
    """(rows, evaluated, stopped): the result rows of the first `evaluated` traces of the
    batch, and whether the chunk must stop now (its time ran out, or the task's soft limit).

    The first trace is always evaluated, so that every attempt of a chunk advances it.
    """
    if not judges(targets):
        return bulk.evaluate_rows(engine, targets, traces, mode, evaluation_id, services), len(traces), False
    now = timezone.now()
    plans: dict[tuple[Any, Any, Any], Plan] = {}
    stopping = threading.Event()

    def one(index: int, trace: bulk.StoredTrace, bound: EvaluationServices) -> list[ResultRow] | None:
        if index and (stopping.is_set() or time.monotonic() >= stop_at):
            stopping.set()
            return None
        return bulk.evaluate_rows(engine, targets, [trace], mode, evaluation_id, bound, now=now, plans=plans)

    if pool is None or services.judge is None:
        outcomes = [one(index, trace, services) for index, trace in enumerate(traces)]
    else:
        relay = _Relay(services.judge, pool.requests)
        relayed = EvaluationServices(sandbox=services.sandbox, judge=cast(ConsoleJudgeServices, relay))

        def job(index: int, trace: bulk.StoredTrace) -> list[ResultRow] | None:
            try:
                return one(index, trace, relayed)
            except _Interrupted:
                return None
            finally:
                relay.job_ended()

        futures = [pool.submit(job, index, trace) for index, trace in enumerate(traces)]
        relay.serve(len(futures), stopping)
        outcomes = [future.result() for future in futures]
    rows: list[ResultRow] = []
    evaluated = 0
    for outcome in outcomes:
        if outcome is None:
            break
        rows.extend(outcome)
        evaluated += 1
    return rows, evaluated, stopping.is_set()
