"""A sandbox worker process: isolates itself once, then evaluates one handler on request.

Started by the pool (pool.py) with an empty environment and only its channel descriptor
open. On start it takes its posture, in this order:

1. network: `none` and `allowlist` move it into a new network namespace with no interface
   up (unshare(CLONE_NEWNET)); where the kernel refuses, it reports why and exits, so that
   the check is not run (fail closed). `allowlist` then brokers connects through the pool.
2. the guard: a Python audit hook that refuses what would reach outside the worker's own
   process: ctypes, starting programs or forking, signalling another process, changing
   resource limits, reading another process's /proc entries (the console's environment is
   in /proc/<pid>/environ), and Unix-socket connects when the network is restricted. It is a
   Python-level guard: the kernel-level boundaries (namespace, memory rlimit, CPU timer,
   the pool's wall-clock kill, the cleared environment) do not depend on it.
3. the handler's module is imported (warm: once per worker).
4. memory: RLIMIT_AS is set to the warm worker's address space plus `memMB`.

Each call then sets os.environ to exactly the declared variables, arms a CPU timer
(ITIMER_PROF, whose default action ends the process) and calls the handler.
"""

from __future__ import annotations

import ctypes
import importlib
import importlib.util
import json
import os
import resource
import signal
import socket
import sys
from collections.abc import Callable
from typing import Any

from guardrails.engine.sandbox.network import install_brokered_sockets
from guardrails.engine.sandbox.protocol import Channel, ChannelClosed, Message

CLONE_NEWNET = 0x40000000
#: Exit status of a worker that ran out of memory (it reports first, then leaves).
EXIT_RETIRED = 3

# Taken before any handler code runs, so that a handler cannot swap them out.
_setrlimit = resource.setrlimit
_getpid = os.getpid

Handler = Callable[[Any, Any], Any]


class SetupError(Exception):
    """The worker cannot take the posture it was asked for."""


def _isolate_network(kind: str, channel: Channel) -> None:
    if kind == "unrestricted":
        return
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.unshare(CLONE_NEWNET) != 0:
        code = ctypes.get_errno()
        raise SetupError(
            f"network {kind} cannot be enforced on this platform: unshare(CLONE_NEWNET) failed "
            f"({os.strerror(code)}); the check is not run without isolation"
        )
    if kind == "allowlist":
        install_brokered_sockets(channel)


_BLOCKED_EVENTS = (
    "ctypes.",
    "subprocess.Popen",
    "os.system",
    "os.exec",
    "os.posix_spawn",
    "os.spawn",
    "os.fork",
    "os.forkpty",
    "os.setuid",
    "os.setgid",
)


def _another_process_entry(path: object) -> bool:
    if isinstance(path, int):
        return False
    try:
        resolved = os.path.realpath(os.fsdecode(path))  # type: ignore[arg-type]
    except (TypeError, ValueError, OSError):
        return True
    parts = resolved.split("/")
    return (
        len(parts) > 2
        and parts[1] == "proc"
        and parts[2] != str(_getpid())
        and (parts[2].isdigit() or parts[2] in ("thread-self",))
    )


def _install_guard(network_kind: str, sealed: list[bool]) -> None:
    pid = _getpid()
    restricted = network_kind != "unrestricted"

    def guard(event: str, args: tuple[Any, ...]) -> None:
        if event.startswith(_BLOCKED_EVENTS):
            raise PermissionError(f"the sandbox does not allow {event}")
        if event in ("os.kill", "os.killpg", "signal.pthread_kill") and (
            event != "os.kill" or args[0] != pid
        ):
            raise PermissionError(f"the sandbox does not allow {event} outside the worker")
        if event in ("resource.setrlimit", "resource.prlimit") and sealed[0]:
            raise PermissionError("the sandbox does not allow changing resource limits")
        if event == "open" and _another_process_entry(args[0]):
            raise PermissionError(f"the sandbox does not allow opening {args[0]!r}")
        if event == "socket.connect" and restricted and isinstance(args[1], (str, bytes)):
            raise PermissionError("the sandbox's network policy does not allow Unix sockets")

    sys.addaudithook(guard)


def _import_handler(module: str, function: str) -> Handler:
    try:
        if os.path.isabs(module):
            spec = importlib.util.spec_from_file_location("kindgi_sandboxed_check", module)
            if spec is None or spec.loader is None:
                raise ImportError(f"{module} is not a Python module")
            loaded = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(loaded)
        else:
            loaded = importlib.import_module(module)
        target: Any = loaded
        for part in function.split("."):
            target = getattr(target, part)
    except Exception as error:
        reason = f"{type(error).__name__}: {error}"
        raise SetupError(f"cannot import {module}:{function}: {reason}") from None
    if not callable(target):
        raise SetupError(f"{module}:{function} is not callable")
    handler: Handler = target
    return handler


def _address_space_bytes() -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    raise SetupError("cannot read the worker's address space size")


def _cap_memory(mem_mb: int) -> None:
    limit = _address_space_bytes() + mem_mb * 1024 * 1024
    _setrlimit(resource.RLIMIT_AS, (limit, limit))


def _outcome_message(outcome: object) -> Message:
    passed = getattr(outcome, "passed", None)
    if not isinstance(passed, bool):
        return {
            "op": "result",
            "status": "raised",
            "reason": f"check returned {type(outcome).__name__}, not a CheckOutcome",
        }
    return {
        "op": "result",
        "status": "ok",
        "passed": passed,
        "reason": getattr(outcome, "reason", None),
        "details": dict(getattr(outcome, "details", {}) or {}),
    }


def _call(handler: Handler, message: Message, setup: Message) -> tuple[Message, bool]:
    """One evaluation; the flag says whether the worker must retire after replying."""
    os.environ.clear()
    os.environ.update({str(k): str(v) for k, v in (message.get("env") or {}).items()})
    out_of_memory = False
    signal.setitimer(signal.ITIMER_PROF, setup["cpuMs"] / 1000)
    try:
        reply = _outcome_message(handler(message["config"], message["trace"]))
    except MemoryError:
        out_of_memory = True  # replied below, once the handler's frames are gone
    except BaseException as error:
        reply = {
            "op": "result",
            "status": "raised",
            "reason": f"check raised {type(error).__name__}: {error}",
        }
    finally:
        signal.setitimer(signal.ITIMER_PROF, 0)
        os.environ.clear()
    if out_of_memory:
        return {
            "op": "result",
            "status": "limit",
            "reason": f"memory limit {setup['memMB']} MB exceeded",
        }, True
    return reply, False


def serve(channel: Channel, handler: Handler, setup: Message) -> int:
    while True:
        try:
            message, _ = channel.receive()
        except ChannelClosed:
            return 0
        if message.get("op") != "call":
            continue
        reply, retire = _call(handler, message, setup)
        try:
            channel.send(reply)
        except ChannelClosed:
            return 0
        if retire:
            return EXIT_RETIRED


def main(argv: list[str]) -> int:
    """argv: the channel descriptor and the setup (JSON: handler, posture)."""
    channel = Channel(socket.socket(fileno=int(argv[0])))
    setup: Message = json.loads(argv[1])
    os.environ.clear()
    sealed = [False]
    try:
        _isolate_network(setup["network"], channel)
        _install_guard(setup["network"], sealed)
        handler = _import_handler(setup["module"], setup["function"])
        _cap_memory(setup["memMB"])
    except SetupError as error:
        channel.send({"op": "ready", "ok": False, "error": str(error)})
        return 1
    sealed[0] = True
    channel.send({"op": "ready", "ok": True})
    return serve(channel, handler, setup)
