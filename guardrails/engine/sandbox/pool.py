"""A pool of warm sandbox workers, keyed by posture and handler.

A worker is a fresh interpreter (`python -I`, empty environment, only its channel open)
that isolates itself once and then evaluates its handler as often as it is asked, so a
sandboxed call costs a round trip over a Unix socket, not a process start. A worker that
hit a limit, crashed, was killed or overran its wall-clock bound is killed and forgotten;
the next call starts a new one, and the other workers go on. Thread-safe.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from guardrails.engine.sandbox.network import AllowlistBroker
from guardrails.engine.sandbox.posture import HandlerRef, Posture, SandboxDefaults
from guardrails.engine.sandbox.protocol import Channel, ChannelClosed, Message
from guardrails.engine.types import CheckOutcome, StrategyError

_BOOTSTRAP = (
    "import sys, json; sys.path[:0] = json.loads(sys.argv[1]); "
    "from guardrails.engine.sandbox.worker import main; sys.exit(main(sys.argv[2:]))"
)
_CPU_SIGNALS = (signal.SIGPROF, signal.SIGXCPU)


class SandboxError(StrategyError):
    """The sandbox could not give a verdict: a limit, a crash, a posture it cannot enforce."""


@dataclass(frozen=True, slots=True)
class PoolKey:
    posture: Posture
    handler: HandlerRef


class _Worker:
    """One worker process and the pool's end of its channel."""

    def __init__(
        self, key: PoolKey, python: str, sys_path: Sequence[str], timeout_s: float
    ) -> None:
        self.key = key
        parent_end, child_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        setup = {
            "module": key.handler.module,
            "function": key.handler.function,
            "memMB": key.posture.mem_mb,
            "cpuMs": key.posture.cpu_ms,
            "network": key.posture.network.kind,
        }
        try:
            self.process = subprocess.Popen(
                [
                    python,
                    "-I",
                    "-c",
                    _BOOTSTRAP,
                    json.dumps(list(sys_path)),
                    str(child_end.fileno()),
                    json.dumps(setup),
                ],
                env={},
                cwd="/",
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                pass_fds=(child_end.fileno(),),
                close_fds=True,
            )
        finally:
            child_end.close()
        self.channel = Channel(parent_end)
        self.broker = (
            AllowlistBroker(key.posture.network.hosts)
            if key.posture.network.kind == "allowlist"
            else None
        )
        self._await_ready(time.monotonic() + timeout_s)

    def _await_ready(self, deadline: float) -> None:
        try:
            message, _ = self.channel.receive(deadline)
        except (TimeoutError, ChannelClosed) as error:
            self.kill()
            raise SandboxError(f"the sandbox worker did not start: {self._death(error)}") from None
        if not message.get("ok"):
            self.kill()
            raise SandboxError(str(message.get("error") or "the sandbox worker did not start"))

    def call(self, config: Any, trace: Any, env: Mapping[str, str]) -> Message:
        """Evaluate once; raises SandboxError (and leaves the worker dead) on a limit or crash."""
        deadline = time.monotonic() + self.key.posture.wall_ms / 1000
        try:
            self.channel.send({"op": "call", "config": config, "trace": trace, "env": dict(env)})
            while True:
                message, fds = self.channel.receive(deadline)
                for fd in fds:
                    os.close(fd)
                if message.get("op") == "result":
                    return message
                self._serve_broker(message, deadline)
        except TimeoutError:
            self.kill()
            raise SandboxError(self._wall_reason()) from None
        except ChannelClosed as error:
            self.kill()
            raise SandboxError(self._death(error)) from None

    def _serve_broker(self, message: Message, deadline: float) -> None:
        if self.broker is None or message.get("op") not in ("connect", "resolve"):
            raise ChannelClosed(f"unexpected message {message.get('op')!r} from the worker")
        reply, fds = self.broker.handle(message, deadline)
        try:
            self.channel.send(reply, fds)
        finally:
            for fd in fds:
                os.close(fd)

    def _wall_reason(self) -> str:
        posture = self.key.posture
        return (
            f"CPU limit {posture.cpu_ms} ms exceeded: the check ran past its wall-clock bound "
            f"of {posture.wall_ms} ms and was stopped"
        )

    def _death(self, error: BaseException) -> str:
        try:
            code = self.process.wait(timeout=2)
        except subprocess.TimeoutExpired:
            return f"the sandbox worker stopped answering ({error})"
        posture = self.key.posture
        if -code in _CPU_SIGNALS:
            return f"CPU limit {posture.cpu_ms} ms exceeded"
        if code < 0:
            name = signal.Signals(-code).name
            return f"the sandbox worker was killed by {name} while running the check"
        return f"the sandbox worker exited with status {code} while running the check"

    @property
    def alive(self) -> bool:
        return self.process.poll() is None

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(timeout=5)
        self.channel.close()

    def close(self) -> None:
        """Ask the worker to leave (it exits when its channel closes), then make sure."""
        self.channel.close()
        try:
            self.process.wait(timeout=1)
        except subprocess.TimeoutExpired:
            self.kill()


@dataclass
class _Slot:
    """The workers of one key: idle ones, and how many exist (idle or busy)."""

    idle: list[_Worker] = field(default_factory=list)
    count: int = 0


class SandboxPool:
    """Warm workers per (posture, handler), at most `size` per key."""

    def __init__(
        self,
        defaults: SandboxDefaults | None = None,
        *,
        environ: Mapping[str, str] | None = None,
        python: str | None = None,
        sys_path: Sequence[str] | None = None,
    ) -> None:
        self.defaults = defaults or SandboxDefaults()
        #: Where declared env variables and secrets are read from (the console's environment).
        self.environ: Mapping[str, str] = os.environ if environ is None else environ
        self.python = python or sys.executable
        self.sys_path = [p for p in (sys_path if sys_path is not None else sys.path) if p]
        self._slots: dict[PoolKey, _Slot] = {}
        self._lock = threading.Condition()
        self._closed = False
        self.started = 0

    def run(
        self,
        posture: Posture,
        handler: HandlerRef,
        config: Any,
        trace: Any,
        env: Mapping[str, str] | None = None,
    ) -> CheckOutcome:
        """Evaluate `handler` under `posture`; SandboxError when no verdict can be had."""
        key = PoolKey(posture, handler)
        worker = self._acquire(key)
        healthy = False
        try:
            message = worker.call(config, trace, env or {})
            healthy = message.get("status") in ("ok", "raised")
            return _outcome(message)
        finally:
            self._release(key, worker, healthy)

    def _acquire(self, key: PoolKey) -> _Worker:
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
            worker = _Worker(key, self.python, self.sys_path, self.defaults.start_timeout_s)
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
            worker.channel.close()

    def _release(self, key: PoolKey, worker: _Worker, healthy: bool) -> None:
        if healthy and worker.alive and not self._closed:
            with self._lock:
                self._slots[key].idle.append(worker)
                self._lock.notify()
            return
        worker.kill()
        self._forget(key)

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


def _outcome(message: Message) -> CheckOutcome:
    status = message.get("status")
    if status == "ok":
        details = message.get("details") or {}
        return CheckOutcome(
            passed=bool(message["passed"]), reason=message.get("reason"), details=details
        )
    raise SandboxError(str(message.get("reason") or "the sandboxed check gave no verdict"))
