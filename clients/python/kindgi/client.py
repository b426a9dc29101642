"""`Kindgi`, the synchronous client: verdicts in the caller's thread, ingestion in a background one."""

from __future__ import annotations

import atexit
import collections
import threading
import time
import weakref
from collections.abc import Mapping
from types import TracebackType
from typing import Any

import httpx

from kindgi import _http
from kindgi._http import Attempts, IngestStats, Policy
from kindgi.verdict import FailMode, Stage, Verdict


class Kindgi:
    """A runtime's connection to the console.

    `timeout` bounds each verdict, retries included; `fail_mode` is the verdict when the console
    gives none in time ("open": the turn goes on, "closed": it is halted), and `error` says so.
    `ingest()` queues a trace for a background thread that sends batches of up to `batch_size`,
    at least every `flush_interval` seconds; a full queue drops the trace and counts it.
    """

    def __init__(
        self,
        base_url: str,
        api_key: str,
        *,
        timeout: float = 1.0,
        fail_mode: FailMode = "open",
        max_attempts: int = 4,
        queue_size: int = 10_000,
        batch_size: int = 200,
        flush_interval: float = 0.5,
        ingest_timeout: float = 10.0,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        if fail_mode not in ("open", "closed"):
            raise ValueError('fail_mode is "open" or "closed"')
        self.fail_mode: FailMode = fail_mode
        self.policy = Policy(timeout=timeout, max_attempts=max_attempts)
        self._http = httpx.Client(
            base_url=base_url.rstrip("/"), headers=_http.client_headers(api_key), transport=transport
        )
        self._ingestion = _Ingestion(
            self._http,
            Policy(ingest_timeout, max_attempts),
            queue_size,
            min(batch_size, _http.MAX_BATCH),
            flush_interval,
        )

    def check_input(self, trace: Mapping[str, Any], *, store: bool = True) -> Verdict:
        """The verdict before the model runs: `trace` holds the user's input (and messages so far)."""
        return self.evaluate(trace, "input", store=store)

    def check_tool_call(self, trace: Mapping[str, Any], call: Mapping[str, Any], *, store: bool = True) -> Verdict:
        """Whether `call` may run: it is sent as the last of the turn's `toolCalls`, without a result."""
        return self.evaluate(_http.with_proposed_call(trace, call), "tool-call", store=store)

    def check_output(self, trace: Mapping[str, Any], *, store: bool = True) -> Verdict:
        """The verdict on the whole turn, once it has its answer."""
        return self.evaluate(trace, "output", store=store)

    def evaluate(self, trace: Mapping[str, Any], stage: Stage, *, store: bool = True) -> Verdict:
        """`POST /api/v1/evaluate?stage=`: the console's verdict, else the one `fail_mode` gives."""
        attempts = self._send(_http.EVALUATE_PATH, _http.encode(trace), _http.evaluate_params(stage, store))
        return _http.verdict_of(attempts, stage, self.fail_mode)

    def _send(self, path: str, body: bytes, params: Mapping[str, str]) -> Attempts:
        return send(self._http, self.policy, path, body, params)

    def ingest(self, trace: Mapping[str, Any]) -> bool:
        """Queue `trace` to be stored; never waits. False when the queue is full (counted as dropped)."""
        return self._ingestion.put(trace)

    @property
    def ingest_stats(self) -> IngestStats:
        return self._ingestion.stats

    def flush(self, timeout: float | None = None) -> bool:
        """Send what `ingest()` queued and wait for it; False when `timeout` passed first."""
        return self._ingestion.flush(timeout)

    def close(self) -> None:
        """Flush the queued traces, stop the ingestion thread and close the connections."""
        self._ingestion.close()
        self._http.close()

    def __enter__(self) -> Kindgi:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, value: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self.close()


def send(client: httpx.Client, policy: Policy, path: str, body: bytes, params: Mapping[str, str]) -> Attempts:
    """POST `body` to `path` under `policy`: the attempts made, the last answer among them."""
    attempts = Attempts(policy)
    while (left := attempts.next_timeout()) is not None:
        try:
            response = client.post(path, content=body, params=params, headers=attempts.headers, timeout=left)
        except httpx.TransportError as exc:
            attempts.failed(exc)
        else:
            if attempts.answered(response):
                return attempts
        wait = attempts.pause()
        if wait is None:
            break
        time.sleep(wait)
    return attempts


class _Ingestion:
    """The bounded queue of traces to store and the daemon thread that sends them in batches.

    The thread starts with the first trace. It is a daemon so that it never holds the
    interpreter open; an `atexit` hook flushes what is left, which runs while daemon threads
    still do.
    """

    def __init__(self, client: httpx.Client, policy: Policy, queue_size: int, batch_size: int, interval: float) -> None:
        self._client, self._policy = client, policy
        self._size, self._batch_size, self._interval = queue_size, batch_size, interval
        self._queue: collections.deque[Mapping[str, Any]] = collections.deque()
        self._changed = threading.Condition()
        self._in_flight = 0
        self._flushing = 0
        self._closed = False
        self._thread: threading.Thread | None = None
        self.stats = IngestStats()

    def put(self, trace: Mapping[str, Any]) -> bool:
        with self._changed:
            if self._closed or len(self._queue) >= self._size:
                self.stats.dropped += 1
                return False
            self._queue.append(trace)
            self.stats.queued += 1
            if self._thread is None:
                self._start()
            if len(self._queue) in (1, self._batch_size):  # the thread waits for a first trace, then a batch
                self._changed.notify_all()
        return True

    def _start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="kindgi-ingest", daemon=True)
        self._thread.start()
        atexit.register(_flush_at_exit, weakref.ref(self))

    def flush(self, timeout: float | None = None) -> bool:
        with self._changed:
            self._flushing += 1
            self._changed.notify_all()
            try:
                return self._changed.wait_for(lambda: not self._queue and not self._in_flight, timeout)
            finally:
                self._flushing -= 1

    def close(self) -> None:
        self.flush(self._policy.timeout * 2)
        with self._changed:
            self._closed = True
            self._changed.notify_all()
        if self._thread is not None:
            self._thread.join(self._policy.timeout)

    def _run(self) -> None:
        while (batch := self._next_batch()) is not None:
            attempts = send(self._client, self._policy, _http.TRACES_PATH, _http.encode({"traces": batch}), {})
            with self._changed:
                self.stats.count(len(batch), attempts)
                self._in_flight = 0
                self._changed.notify_all()

    def _next_batch(self) -> list[Mapping[str, Any]] | None:
        """Wait for a full batch, a flush or the interval; None once closed with nothing left."""
        with self._changed:
            self._changed.wait_for(lambda: self._queue or self._closed)
            if not self._queue:
                return None
            self._changed.wait_for(self._batch_ready, self._interval)
            batch = [self._queue.popleft() for _ in range(min(self._batch_size, len(self._queue)))]
            self._in_flight = len(batch)
            return batch

    def _batch_ready(self) -> bool:
        return len(self._queue) >= self._batch_size or self._flushing > 0 or self._closed


def _flush_at_exit(ingestion: weakref.ref[_Ingestion]) -> None:
    alive = ingestion()
    if alive is not None and not alive._closed:
        alive.flush(alive._policy.timeout)
