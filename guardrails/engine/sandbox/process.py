"""One sandbox worker as the pool sees it: its bwrap process, control group and channel.

The worker is started behind the OS boundary (boundary.py) in a control group of its own
(cgroup.py) when the host has one to give. The pool talks to it over a Unix socket pair
given as its standard input. Each call has an id: frames with any other id are dropped, a
frame over 64 KB is an error, and a worker that still has anything running (a thread, a
child) after its reply is killed and replaced. Killing a worker kills bwrap, and with it
the PID namespace's init and everything in the namespace, then whatever is left in its
control group.
"""

from __future__ import annotations

import base64
import contextlib
import itertools
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import guardrails.engine.sandbox.boundary as boundary_module
from guardrails.engine.sandbox.boundary import SOURCE_ROOT, Boundary
from guardrails.engine.sandbox.cgroup import SandboxCgroup, layout
from guardrails.engine.sandbox.network import AllowlistBroker
from guardrails.engine.sandbox.posture import HandlerRef, NetworkPolicy, Posture, SandboxDefaults
from guardrails.engine.sandbox.protocol import MAX_REPLY_BYTES, Channel, ChannelClosed, Message, MessageTooLarge
from guardrails.engine.types import StrategyError

#: The CPU a pack's import may take when the console describes it (more than one check's
#: call: the engine's own modules are imported with it).
DESCRIBE_CPU_MS = 5000
#: What the interpreter and bwrap take before a check allocates anything: the control
#: group's memory limit is `memMB` plus this.
RUNTIME_MB = 64
_CPU_SIGNALS = (signal.SIGPROF, signal.SIGXCPU)
_JOIN_CGROUP = 'for f; do [ "$f" = -- ] && break; echo $$ > "$f" || exit 111; shift; done; shift; exec "$@"'


class SandboxError(StrategyError):
    """The sandbox could not give a verdict: a limit, a crash, a posture it cannot enforce."""


class WorkerProcess:
    """One worker behind the boundary, for one tenant, posture and handler."""

    def __init__(
        self,
        posture: Posture,
        handler: HandlerRef,
        boundary: Boundary,
        sys_path: Sequence[str],
        defaults: SandboxDefaults,
        op: str = "setup",
    ) -> None:
        self.posture = posture
        self._ids = itertools.count(1)
        self._prefix = secrets.token_hex(4)
        self.cgroup = self._make_cgroup(defaults)
        self.broker = AllowlistBroker(posture.network.hosts) if posture.network.kind == "allowlist" else None
        self.process, self.channel = self._start(boundary, handler, sys_path)
        setup = {
            "op": op,
            "sysPath": list(sys_path),
            "module": handler.module,
            "function": handler.function,
            "memMB": posture.mem_mb,
            "cpuMs": posture.cpu_ms,
            "network": posture.network.kind,
            "maxTasks": defaults.max_tasks,
            # strict: the worker is the sandbox's only process (seccomp_bpf.py --no-spawn)
            "noSpawnFilter": (
                base64.b64encode(boundary_module.seccomp_program(no_spawn=True)).decode()
                if posture.level == "strict"
                else None
            ),
        }
        deadline = time.monotonic() + defaults.start_timeout_s + posture.wall_ms / 1000
        #: What a worker started to describe a pack (op "describe") answered.
        self.described = self._await_ready(setup, deadline)
        serving = op != "describe"
        self.worker_pid = _descendant(self.process.pid, depth=2) if serving else None
        self.baseline_tasks = self.tasks() if serving else 0

    def _make_cgroup(self, defaults: SandboxDefaults) -> SandboxCgroup | None:
        where = layout()
        if where is None:
            return None
        memory = (self.posture.mem_mb + RUNTIME_MB) * 1024 * 1024
        try:
            return SandboxCgroup(where, memory, defaults.max_tasks + 4)
        except OSError as error:
            raise SandboxError(f"the sandbox's control group cannot be made: {error}; the check is not run") from None

    def _start(
        self, boundary: Boundary, handler: HandlerRef, sys_path: Sequence[str]
    ) -> tuple[subprocess.Popen[bytes], Channel]:
        argv, seccomp_fd = boundary.worker_command(self.posture, handler, sys_path)
        if self.cgroup is not None:
            argv = ["/bin/sh", "-c", _JOIN_CGROUP, "kindgi-sandbox", *self.cgroup.procs_files(), "--", *argv]
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            process = subprocess.Popen(
                argv,
                stdin=theirs.fileno(),
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                pass_fds=(seccomp_fd,),
                env={},
                cwd="/",
                close_fds=True,
                start_new_session=True,
            )
        except OSError as error:
            ours.close()
            self._drop_cgroup()
            raise SandboxError(f"the sandbox worker cannot be started: {error}") from None
        finally:
            theirs.close()
            os.close(seccomp_fd)
        return process, Channel(ours, max_bytes=MAX_REPLY_BYTES)

    def _await_ready(self, setup: Message, deadline: float) -> Message:
        wanted = "described" if setup["op"] == "describe" else "ready"
        try:
            self.channel.send(setup)
            message = self._receive("setup", deadline, wanted)
        except TimeoutError:
            self.kill()
            raise SandboxError(
                f"CPU limit {self.posture.cpu_ms} ms exceeded: the check's module was still "
                "being imported at its wall-clock bound"
            ) from None
        except ChannelClosed as error:
            reason = self.death_reason(error)
            self.kill()
            raise SandboxError(f"the sandbox worker did not start: {reason}") from None
        if message.get("ok") is not True:
            self.kill()
            raise SandboxError(str(message.get("error") or "the sandbox worker did not start")[:4096])
        return message

    def call(self, config: Any, trace: Any, env: Mapping[str, str]) -> Message:
        """Send one call and wait for its result; TimeoutError/ChannelClosed as they come."""
        call_id = f"{self._prefix}-{next(self._ids)}"
        deadline = time.monotonic() + self.posture.wall_ms / 1000
        self.channel.send({"op": "call", "id": call_id, "config": config, "trace": trace, "env": dict(env)})
        return self._receive(call_id, deadline, "result")

    def _receive(self, call_id: str, deadline: float, wanted: str) -> Message:
        """The frame `wanted` of this call, serving broker requests; other frames dropped."""
        while True:
            message, fds = self.channel.receive(deadline)
            for fd in fds:
                os.close(fd)
            if message.get("id") != call_id:
                continue
            if message.get("op") == wanted:
                return message
            self._serve_broker(message, deadline)

    def _serve_broker(self, message: Message, deadline: float) -> None:
        if self.broker is None or message.get("op") not in ("connect", "resolve"):
            return
        reply, fds = self.broker.handle(message, deadline)
        reply["id"] = message.get("id")
        try:
            self.channel.send(reply, fds)
        finally:
            for fd in fds:
                os.close(fd)

    def tasks(self) -> int:
        """Tasks (processes and threads) of the sandbox: its control group's, else /proc's."""
        if self.cgroup is not None:
            return self.cgroup.tasks()
        return _tasks_in_namespace(self.worker_pid) if self.worker_pid is not None else 0

    def left_running(self) -> bool:
        """Whether the check left a thread or a process running after its reply, or is
        itself still running (its reply sent early): the worker must be back waiting on its
        channel within IDLE_GRACE_S."""
        if self.tasks() > self.baseline_tasks:
            return True
        return self.worker_pid is not None and not _waits_on_channel(self.worker_pid)

    def death_reason(self, error: BaseException) -> str:
        """Why the worker stopped answering, in the words a result's reason uses."""
        if isinstance(error, MessageTooLarge):
            return f"the check's reply is larger than {MAX_REPLY_BYTES // 1024} KB"
        try:
            code = self.process.wait(timeout=2)
        except subprocess.TimeoutExpired:
            return f"the sandbox worker stopped answering ({error})"
        posture = self.posture
        if self.cgroup is not None and self.cgroup.out_of_memory():
            return f"memory limit {posture.mem_mb} MB exceeded"
        signum = -code if code < 0 else code - 128 if code > 128 else 0
        if signum in _CPU_SIGNALS:
            return f"CPU limit {posture.cpu_ms} ms exceeded"
        if signum:
            name = signal.Signals(signum).name if signum in signal.valid_signals() else signum
            return f"the sandbox worker was killed by {name} while running the check"
        return f"the sandbox worker exited with status {code} while running the check"

    @property
    def alive(self) -> bool:
        return self.process.poll() is None

    def kill(self) -> None:
        """Kill the whole sandbox: bwrap, its namespace, whatever is left in its group."""
        if self.broker is not None:
            self.broker.relays.stop()
        if self.process.poll() is None:
            self.process.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(timeout=5)
        self.channel.close()
        self._drop_cgroup()

    def _drop_cgroup(self) -> None:
        if self.cgroup is not None:
            self.cgroup.kill_all()

    def close(self) -> None:
        """Ask the worker to leave (it exits when its channel closes), then make sure."""
        self.channel.close()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(timeout=1)
        self.kill()


#: How long a worker may take, after its reply, to be back waiting on its channel.
IDLE_GRACE_S = 1.0
_RECVMSG = {"x86_64": "47", "aarch64": "212"}.get(os.uname().machine, "")


def _waits_on_channel(pid: int) -> bool:
    """Whether the worker's main thread is blocked in recvmsg (its wait for the next call)."""
    path = f"/proc/{pid}/syscall"
    deadline = time.monotonic() + IDLE_GRACE_S
    while True:
        try:
            with open(path) as handle:
                current = handle.read().split(" ", 1)[0]
        except OSError:
            # Gone (killed by a limit after its reply): not waiting. Else not readable
            # here, and the task count is the only check.
            return os.path.exists(f"/proc/{pid}/stat") and _is_alive(pid)
        if current == _RECVMSG or not _RECVMSG:
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(0.0002)


def _is_alive(pid: int) -> bool:
    """Whether `pid` runs (a zombie, dead but not yet reaped, does not)."""
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def _descendant(pid: int, depth: int) -> int | None:
    """The first child's child's ... (`depth` levels) of `pid`: bwrap -> init -> worker."""
    for _ in range(depth):
        children = [child for child, parent in _parents().items() if parent == pid]
        if not children:
            return None
        pid = min(children)
    return pid


def _parents() -> dict[int, int]:
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError, ValueError, IndexError):
                parents[int(entry.name)] = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
    return parents


def _tasks_in_namespace(worker_pid: int) -> int:
    """Threads of every process of the sandbox, read from its own /proc (hosts without a
    control group): the worker's root is the sandbox's, whose /proc lists only its pids."""
    proc = f"/proc/{worker_pid}/root/proc"
    total = 0
    try:
        entries = [entry for entry in os.listdir(proc) if entry.isdigit()]
    except OSError:
        return 0
    for entry in entries:
        with contextlib.suppress(OSError, ValueError, IndexError), open(f"{proc}/{entry}/stat") as handle:
            total += int(handle.read().rsplit(")", 1)[1].split()[17])
    return total


def describe_pack(module: str, boundary: Boundary, sys_path: Sequence[str], defaults: SandboxDefaults) -> Message:
    """Import the pack `module` in a one-shot sandbox (network none, the default limits) and
    return its description: version and checks as data. SandboxError when it cannot."""
    posture = Posture(
        "strict", defaults.mem_mb, max(defaults.cpu_ms, DESCRIBE_CPU_MS), NetworkPolicy("none"), defaults.wall_grace_ms
    )
    worker = WorkerProcess(posture, HandlerRef(module, ""), boundary, sys_path, defaults, op="describe")
    worker.kill()
    return worker.described


def describe_on_this_host(module: str) -> Message | None:
    """`describe_pack` with this host's boundary and the default limits; None where the host
    cannot build a sandbox (the caller then imports the pack itself)."""
    boundary = boundary_module.host_boundary()
    if boundary.unavailable() is not None:
        return None
    sys_path = [p for p in [str(SOURCE_ROOT), *sys.path] if p and os.path.isabs(p)]
    return describe_pack(module, boundary, sys_path, SandboxDefaults())
