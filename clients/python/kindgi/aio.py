"""`AsyncKindgi`: the same methods as `Kindgi`, awaited, and ingestion in an asyncio task."""

from __future__ import annotations

import asyncio
import atexit
import collections
import weakref
from collections.abc import Mapping
from types import TracebackType
from typing import Any

import httpx

from kindgi import _http
from kindgi._http import Attempts, IngestStats, Policy
from kindgi.client import send as send_sync
from kindgi.verdict import FailMode, Stage, Verdict


class AsyncKindgi:
    """A runtime's connection to the console, for asyncio agents (see `Kindgi` for the arguments).

    Each call's deadline is also an `asyncio.timeout`, so it holds whatever the server trickles.
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
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        if fail_mode not in ("open", "closed"):
            raise ValueError('fail_mode is "open" or "closed"')
        self.fail_mode: FailMode = fail_mode
        self.policy = Policy(timeout=timeout, max_attempts=max_attempts)
        self._base_url, self._headers = base_url.rstrip("/"), _http.client_headers(api_key)
        self._http = httpx.AsyncClient(base_url=self._base_url, headers=self._headers, transport=transport)
        self._ingestion = _AsyncIngestion(
            self, Policy(ingest_timeout, max_attempts), queue_size, min(batch_size, _http.MAX_BATCH), flush_interval
        )

    async def check_input(self, trace: Mapping[str, Any], *, store: bool = True) -> Verdict:
        """The verdict before the model runs."""
        return await self.evaluate(trace, "input", store=store)

    async def check_tool_call(
        self, trace: Mapping[str, Any], call: Mapping[str, Any], *, store: bool = True
    ) -> Verdict:
        """Whether `call` may run: it is sent as the last of the turn's `toolCalls`."""
        return await self.evaluate(_http.with_proposed_call(trace, call), "tool-call", store=store)

    async def check_output(self, trace: Mapping[str, Any], *, store: bool = True) -> Verdict:
        """The verdict on the whole turn, once it has its answer."""
        return await self.evaluate(trace, "output", store=store)

    async def evaluate(self, trace: Mapping[str, Any], stage: Stage, *, store: bool = True) -> Verdict:
        """`POST /api/v1/evaluate?stage=`: the console's verdict, else the one `fail_mode` gives."""
        body, params = _http.encode(trace), _http.evaluate_params(stage, store)
        attempts = await self._send(self.policy, _http.EVALUATE_PATH, body, params)
        return _http.verdict_of(attempts, stage, self.fail_mode)

    async def _send(self, policy: Policy, path: str, body: bytes, params: Mapping[str, str]) -> Attempts:
        attempts = Attempts(policy)
        try:
            async with asyncio.timeout(policy.timeout):
                await self._attempt_all(attempts, path, body, params)
        except TimeoutError:
            attempts.last, attempts.error = None, f"no answer within {policy.timeout:g}s"
        return attempts

    async def _attempt_all(self, attempts: Attempts, path: str, body: bytes, params: Mapping[str, str]) -> None:
        while (left := attempts.next_timeout()) is not None:
            try:
                response = await self._http.post(
                    path, content=body, params=params, headers=attempts.headers, timeout=left
                )
            except httpx.TransportError as exc:
                attempts.failed(exc)
            else:
                if attempts.answered(response):
                    return
            wait = attempts.pause()
            if wait is None:
                return
            await asyncio.sleep(wait)

    def ingest(self, trace: Mapping[str, Any]) -> bool:
        """Queue `trace` to be stored; never waits. False when the queue is full (counted as dropped).

        Called from a running event loop: the sending task starts on that loop.
        """
        return self._ingestion.put(trace)

    @property
    def ingest_stats(self) -> IngestStats:
        return self._ingestion.stats

    async def flush(self, timeout: float | None = None) -> bool:
        """Send what `ingest()` queued and wait for it; False when `timeout` passed first."""
        return await self._ingestion.flush(timeout)

    async def close(self) -> None:
        """Flush the queued traces, stop the ingestion task and close the connections."""
        await self._ingestion.close()
        await self._http.aclose()

    async def __aenter__(self) -> AsyncKindgi:
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, value: BaseException | None, traceback: TracebackType | None
    ) -> None:
        await self.close()

    def _send_at_exit(self, batch: list[Mapping[str, Any]], stats: IngestStats) -> None:
        """At exit the event loop is gone: what is still queued goes with a synchronous request."""
        with httpx.Client(base_url=self._base_url, headers=self._headers) as client:
            body = _http.encode({"traces": batch})
            stats.count(len(batch), send_sync(client, self._ingestion.policy, _http.TRACES_PATH, body, {}))


class _AsyncIngestion:
    """The bounded queue of traces and the task that sends them in batches (see `Kindgi`)."""

    def __init__(self, owner: AsyncKindgi, policy: Policy, queue_size: int, batch_size: int, interval: float) -> None:
        self._owner, self.policy = owner, policy
        self._size, self._batch_size, self._interval = queue_size, batch_size, interval
        self._queue: collections.deque[Mapping[str, Any]] = collections.deque()
        self._wake = asyncio.Event()
        self._idle = asyncio.Event()
        self._idle.set()
        self._flushing = 0
        self._closed = False
        self._task: asyncio.Task[None] | None = None
        self.stats = IngestStats()

    def put(self, trace: Mapping[str, Any]) -> bool:
        if self._closed or len(self._queue) >= self._size:
            self.stats.dropped += 1
            return False
        self._queue.append(trace)
        self.stats.queued += 1
        self._idle.clear()
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run(), name="kindgi-ingest")
            atexit.register(_send_at_exit, weakref.ref(self))
        self._wake.set()
        return True

    async def flush(self, timeout: float | None = None) -> bool:
        self._flushing += 1
        self._wake.set()
        try:
            await asyncio.wait_for(self._idle.wait(), timeout)
            return True
        except TimeoutError:
            return False
        finally:
            self._flushing -= 1

    async def close(self) -> None:
        await self.flush(self.policy.timeout * 2)
        self._closed = True
        self._wake.set()
        if self._task is not None:
            await asyncio.wait([self._task], timeout=self.policy.timeout)

    async def _run(self) -> None:
        while True:
            await self._wait_for_batch()
            if not self._queue:
                if self._closed:
                    return
                continue
            batch = [self._queue.popleft() for _ in range(min(self._batch_size, len(self._queue)))]
            body = _http.encode({"traces": batch})
            self.stats.count(len(batch), await self._owner._send(self.policy, _http.TRACES_PATH, body, {}))
            if not self._queue:
                self._idle.set()

    async def _wait_for_batch(self) -> None:
        """Until something is queued, then until a full batch, a flush, closing or the interval."""
        while not self._queue and not self._closed:
            self._wake.clear()
            await self._wake.wait()
        until = asyncio.get_running_loop().time() + self._interval
        while not self._batch_ready() and (left := until - asyncio.get_running_loop().time()) > 0:
            self._wake.clear()
            try:
                await asyncio.wait_for(self._wake.wait(), left)
            except TimeoutError:
                return

    def _batch_ready(self) -> bool:
        return len(self._queue) >= self._batch_size or self._flushing > 0 or self._closed


def _send_at_exit(ingestion: weakref.ref[_AsyncIngestion]) -> None:
    alive = ingestion()
    if alive is None or alive._closed or not alive._queue:
        return
    batch = list(alive._queue)
    alive._queue.clear()
    for start in range(0, len(batch), alive._batch_size):
        alive._owner._send_at_exit(batch[start : start + alive._batch_size], alive.stats)
