"""A pool of warm sandbox workers, keyed by tenant, posture and handler.

A worker (process.py) is a fresh interpreter behind the OS boundary (boundary.py) that
imports its handler once and then evaluates it as often as it is asked, so a sandboxed call
costs a round trip over a Unix socket, not a process start. A warm worker serves one tenant
only: what a check keeps in a module global never reaches another tenant's result. A worker
that hit a limit, crashed, overran its wall-clock bound, sent a reply over the size limit or
left anything running after its reply is killed (its whole namespace) and forgotten; the
next call starts a new one, and the other workers go on. Thread-safe.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from guardrails.engine.sandbox.boundary import SOURCE_ROOT, Boundary
from guardrails.engine.sandbox.posture import HandlerRef, Posture, SandboxDefaults
from guardrails.engine.sandbox.process import SandboxError, WorkerProcess
from guardrails.engine.sandbox.protocol import MAX_REASON_CHARS, ChannelClosed, Message
from guardrails.engine.types import CheckOutcome

__all__ = ["PoolKey", "SandboxError", "SandboxPool"]


@dataclass(frozen=True, slots=True)
class PoolKey:
    tenant: str
    posture: Posture
    handler: HandlerRef


@dataclass
class _Slot:
    """The workers of one key: idle ones, and how many exist (idle or busy)."""

    idle: list[WorkerProcess] = field(default_factory=list)
    count: int = 0


class SandboxPool:
    """Warm workers per (tenant, posture, handler), at most `pool_size` per key."""

    def __init__(
        self,
        defaults: SandboxDefaults | None = None,
        *,
        environ: Mapping[str, str] | None = None,
        python: str | None = None,
        sys_path: Sequence[str] | None = None,
        bwrap: str | None = None,
    ) -> None:
        self.defaults = defaults or SandboxDefaults()
        #: Where declared env variables and secrets are read from (the console's environment).
        self.environ: Mapping[str, str] = os.environ if environ is None else environ
        self.boundary = Boundary(bwrap, python)
        paths = sys_path if sys_path is not None else [str(SOURCE_ROOT), *sys.path]
        self.sys_path = [p for p in paths if p and os.path.isabs(p)]
        self._slots: dict[PoolKey, _Slot] = {}
        self._lock = threading.Condition()
        self._closed = False
        self._lru: dict[PoolKey, None] = {}
        self.started = 0

    def run(
        self,
        posture: Posture,
        handler: HandlerRef,
        config: Any,
        trace: Any,
        env: Mapping[str, str] | None = None,
        *,
        tenant: str | None = None,
        check_id: str | None = None,
    ) -> CheckOutcome:
        """Evaluate `handler` under `posture`; SandboxError when no verdict can be had."""
        unavailable = self.boundary.unavailable()
        if unavailable is not None:
            raise SandboxError(f"{unavailable}; the check is not run without its sandbox")
        key = PoolKey(tenant or "", posture, handler)
        worker = self._acquire(key)
        healthy = False
        try:
            message = self._call(worker, config, trace, env or {})
            # A worker out of memory leaves after its reply (and is replaced): not checked.
            if message.get("status") != "limit" and worker.left_running():
                raise SandboxError(
                    "the check kept a thread or a process running after its verdict; its sandbox was stopped"
                )
            # A check that raised or returned something odd keeps its worker; a malformed
            # frame or a limit does not.
            healthy = message.get("status") in ("raised", "returned")
            outcome = _outcome(message, check_id)
            healthy = True
            return outcome
        finally:
            self._release(key, worker, healthy)

    @staticmethod
    def _call(worker: WorkerProcess, config: Any, trace: Any, env: Mapping[str, str]) -> Message:
        try:
            return worker.call(config, trace, env)
        except TimeoutError:
            worker.kill()
            posture = worker.posture
            raise SandboxError(
                f"CPU limit {posture.cpu_ms} ms exceeded: the check ran past its wall-clock "
                f"bound of {posture.wall_ms} ms and was stopped"
            ) from None
        except ChannelClosed as error:
            reason = worker.death_reason(error)
            worker.kill()
            raise SandboxError(reason) from None

    def _acquire(self, key: PoolKey) -> WorkerProcess:
        with self._lock:
            slot = self._slots.setdefault(key, _Slot())
            self._drop_dead(slot)
            while not slot.idle and slot.count >= self.defaults.pool_size:
                self._check_open()
                self._lock.wait()
                self._drop_dead(slot)
            self._check_open()
            if slot.idle:
                return slot.idle.pop()
            slot.count += 1
        try:
            worker = WorkerProcess(key.posture, key.handler, self.boundary, self.sys_path, self.defaults)
        except BaseException:
            self._forget(key)
            raise
        with self._lock:
            self.started += 1
        return worker

    @staticmethod
    def _drop_dead(slot: _Slot) -> None:
        """Forget idle workers that died while waiting (killed from outside, for instance)."""
        for worker in [worker for worker in slot.idle if not worker.alive]:
            slot.idle.remove(worker)
            slot.count -= 1
            worker.kill()

    def _release(self, key: PoolKey, worker: WorkerProcess, healthy: bool) -> None:
        if healthy and worker.alive and not self._closed:
            with self._lock:
                self._slots[key].idle.append(worker)
                self._lru.pop(key, None)
                self._lru[key] = None
                evicted = self._evict_beyond_max_idle()
                self._lock.notify()
            for old in evicted:
                old.close()
            return
        worker.kill()
        self._forget(key)

    def _evict_beyond_max_idle(self) -> list[WorkerProcess]:
        """The least recently used idle workers beyond `max_idle` (called under the lock)."""
        evicted: list[WorkerProcess] = []
        idle = sum(len(slot.idle) for slot in self._slots.values())
        for key in list(self._lru):
            if idle <= self.defaults.max_idle:
                break
            slot = self._slots[key]
            while slot.idle and idle > self.defaults.max_idle:
                evicted.append(slot.idle.pop(0))
                slot.count -= 1
                idle -= 1
            if not slot.idle:
                del self._lru[key]
        return evicted

    def _forget(self, key: PoolKey) -> None:
        with self._lock:
            self._slots[key].count -= 1
            self._lock.notify()

    def _check_open(self) -> None:
        if self._closed:
            raise SandboxError("the sandbox pool is shut down")

    def idle_workers(self) -> int:
        with self._lock:
            return sum(len(slot.idle) for slot in self._slots.values())

    def shutdown(self) -> None:
        """Stop every idle worker; busy ones are stopped when their call returns."""
        with self._lock:
            self._closed = True
            idle = [worker for slot in self._slots.values() for worker in slot.idle]
            for slot in self._slots.values():
                slot.count -= len(slot.idle)
                slot.idle.clear()
            self._lock.notify_all()
        for worker in idle:
            worker.close()

    def __enter__(self) -> SandboxPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()


def _outcome(message: Message, check_id: str | None) -> CheckOutcome:
    """The verdict of a result frame; SandboxError for anything else, checked field by field."""
    status = message.get("status")
    name = f"check '{check_id}'" if check_id else "check"
    if status == "ok":
        passed, reason, details = message.get("passed"), message.get("reason"), message.get("details")
        if not isinstance(passed, bool):
            raise SandboxError(f"{name} returned a result whose passed is not a bool")
        if reason is not None and not isinstance(reason, str):
            raise SandboxError(f"{name} returned a reason that is not text")
        reason = reason if reason is None or len(reason) <= MAX_REASON_CHARS else reason[:MAX_REASON_CHARS]
        return CheckOutcome(passed=passed, reason=reason, details=details if isinstance(details, dict) else {})
    if status == "raised":
        raise SandboxError(f"{name} raised {_text(message.get('error'))}")
    if status == "returned":
        raise SandboxError(f"{name} returned {_text(message.get('what'))}")
    raise SandboxError(_text(message.get("reason")) or "the sandboxed check gave no verdict")


def _text(value: object) -> str:
    return str(value or "")[:MAX_REASON_CHARS]
