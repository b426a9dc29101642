"""Limits over a whole sandbox: one control group per worker, when this host lets us make one.

A control group bounds every process of the sandbox together, whatever it forks: memory
(including what it writes to its tmpfs, which the kernel charges to the group) and the
number of tasks. Version 2 (`memory.max`, `pids.max`) is used where it is mounted with those
controllers; else version 1 (`memory/…/memory.limit_in_bytes`, `pids/…/pids.max`). Where
neither can be written, `available()` is False and the worker relies on per-process rlimits
(see worker.py) and the pool's killing of the whole PID namespace.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
import uuid
from dataclasses import dataclass
from functools import cache
from pathlib import Path

_V2 = Path("/sys/fs/cgroup")
_V1_MEMORY = Path("/sys/fs/cgroup/memory")
_V1_PIDS = Path("/sys/fs/cgroup/pids")
_PARENT = "kindgi-sandbox"


@dataclass(frozen=True, slots=True)
class Layout:
    """Where this host's memory and pids controllers are, and which version they are."""

    version: int
    memory_root: Path
    pids_root: Path


def _writable_dir(root: Path) -> bool:
    probe = root / _PARENT
    try:
        probe.mkdir(exist_ok=True)
    except OSError:
        return False
    return os.access(probe, os.W_OK)


@cache
def layout() -> Layout | None:
    """The controllers a sandbox can be limited with here, or None."""
    controllers = _V2 / "cgroup.controllers"
    if controllers.exists():
        names = controllers.read_text().split()
        if {"memory", "pids"} <= set(names) and _enable_v2_controllers():
            return Layout(2, _V2 / _PARENT, _V2 / _PARENT)
    v1 = _V1_MEMORY.is_dir() and _V1_PIDS.is_dir()
    if v1 and _writable_dir(_V1_MEMORY) and _writable_dir(_V1_PIDS):
        return Layout(1, _V1_MEMORY / _PARENT, _V1_PIDS / _PARENT)
    return None


def _enable_v2_controllers() -> bool:
    try:
        (_V2 / _PARENT).mkdir(exist_ok=True)
        (_V2 / "cgroup.subtree_control").write_text("+memory +pids")
        (_V2 / _PARENT / "cgroup.subtree_control").write_text("+memory +pids")
    except OSError:
        return False
    return True


class SandboxCgroup:
    """The control group of one worker: made with its limits, removed when it dies."""

    def __init__(self, where: Layout, memory_bytes: int, max_tasks: int) -> None:
        self.layout = where
        name = uuid.uuid4().hex
        self.memory = where.memory_root / name
        self.pids = where.pids_root / name
        self.memory.mkdir()
        if self.pids != self.memory:
            self.pids.mkdir()
        if where.version == 2:
            (self.memory / "memory.max").write_text(str(memory_bytes))
            if (self.memory / "memory.swap.max").exists():
                (self.memory / "memory.swap.max").write_text("0")
        else:
            (self.memory / "memory.limit_in_bytes").write_text(str(memory_bytes))
            if (self.memory / "memory.memsw.limit_in_bytes").exists():  # no swapping out
                (self.memory / "memory.memsw.limit_in_bytes").write_text(str(memory_bytes))
        (self.pids / "pids.max").write_text(str(max_tasks))

    def procs_files(self) -> list[str]:
        """The files a process writes its pid to, to join this group."""
        files = [str(self.memory / "cgroup.procs")]
        if self.pids != self.memory:
            files.append(str(self.pids / "cgroup.procs"))
        return files

    def tasks(self) -> int:
        """How many tasks (processes and threads) the sandbox has now."""
        try:
            return int((self.pids / "pids.current").read_text())
        except (OSError, ValueError):
            return 0

    def out_of_memory(self) -> bool:
        """Whether the kernel had to kill a process of the group for memory."""
        if self.layout.version == 2:
            name, key = "memory.events", "oom_kill"
        else:
            name, key = "memory.oom_control", "oom_kill"
        with contextlib.suppress(OSError, ValueError):
            for line in (self.memory / name).read_text().splitlines():
                field, _, value = line.partition(" ")
                if field == key:
                    return int(value) > 0
        return False

    def kill_all(self) -> None:
        """Kill every process left in the group (SIGKILL), then remove the group."""
        kill_file = self.memory / "cgroup.kill"
        if self.layout.version == 2 and kill_file.exists():
            with contextlib.suppress(OSError):
                kill_file.write_text("1")
        for _ in range(50):
            pids = self._pids()
            if not pids:
                break
            for pid in pids:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
        self.remove()

    def remove(self) -> bool:
        """Remove the group once its last process is gone (reaping may take a moment)."""
        for _ in range(40):
            try:
                for path in dict.fromkeys((self.memory, self.pids)):
                    if path.exists():
                        path.rmdir()
                return True
            except OSError:
                time.sleep(0.005)
        return False

    def _pids(self) -> list[int]:
        try:
            return [int(p) for p in (self.memory / "cgroup.procs").read_text().split()]
        except (OSError, ValueError):
            return []
