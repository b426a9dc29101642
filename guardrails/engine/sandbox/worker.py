"""A sandbox worker process: takes its limits, imports one handler, evaluates it on request.

Started by the pool inside the OS boundary (boundary.py: bubblewrap, namespaces, seccomp,
a control group) with an empty environment and its channel as standard input (no
descriptor number or path in its argv). The boundary is the kernel's; this process adds, in
this order, before any of the check's code runs:

1. in `strict`, the second seccomp filter (seccomp_bpf.py --no-spawn, sent in the setup):
   no process or program can be started from here on, so that the worker's own limits are
   the sandbox's; then per-process limits: RLIMIT_AS (its start-up size plus `memMB`, so
   that an allocation beyond it is a clean MemoryError), RLIMIT_NPROC, RLIMIT_CORE 0; a
   child (`context-isolated`) inherits them;
2. under `allowlist`, connects and name lookups brokered by the pool (network.py);
3. the guard: a Python audit hook refusing ctypes, starting programs and signalling other
   processes, so that a check that tries gets a clear PermissionError. It is a second
   layer for messages only; nothing depends on it;
4. the handler's module is imported under a CPU timer of `cpuMs` (the pool's wall clock and
   the control group bound it too).

Each call carries an id; the reply carries it back, with the reason cut to 4 KB.
"""

from __future__ import annotations

import base64
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
from guardrails.engine.sandbox.protocol import MAX_REASON_CHARS, MAX_REPLY_BYTES, Channel, ChannelClosed, Message
from guardrails.engine.types import CheckOutcome, describe_exception, returned_name

#: Exit status of a worker that ran out of memory (it reports first, then leaves).
EXIT_RETIRED = 3

_setrlimit = resource.setrlimit

Handler = Callable[[Any, Any], Any]


class SetupError(Exception):
    """The worker cannot take the posture it was asked for."""


_BLOCKED_EVENTS = (
    "ctypes.",
    "subprocess.Popen",
    "os.system",
    "os.exec",
    "os.posix_spawn",
    "os.spawn",
    "os.fork",
    "os.forkpty",
)


def _install_guard() -> None:
    pid = os.getpid()

    def guard(event: str, args: tuple[Any, ...]) -> None:
        if event.startswith(_BLOCKED_EVENTS):
            raise PermissionError(f"the sandbox does not allow {event}")
        if event in ("os.kill", "os.killpg", "signal.pthread_kill") and (event != "os.kill" or args[0] != pid):
            raise PermissionError(f"the sandbox does not allow {event} outside the worker")

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
    except MemoryError:
        raise SetupError("memory limit exceeded while importing the check") from None
    except BaseException as error:
        raise SetupError(f"cannot import {module}:{function}: {describe_exception(error)}") from None
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


#: prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &program)
_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER = 22, 2


def _refuse_new_processes(program: bytes) -> None:
    """Load the `strict` worker's second seccomp filter on this (only) thread: from now on
    fork, vfork, clone without CLONE_THREAD, execve and execveat fail with EPERM, here and
    in every thread started later. bubblewrap set no_new_privs, which lets an unprivileged
    process add a filter; filters stack, the strictest answer wins."""
    import ctypes

    class SockFprog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    if not program or len(program) % 8:
        raise SetupError("the sandbox's process filter is not a BPF program")
    buffer = ctypes.create_string_buffer(program, len(program))
    fprog = SockFprog(len(program) // 8, ctypes.cast(buffer, ctypes.c_void_p))
    libc = ctypes.CDLL(None, use_errno=True)
    prctl = libc.prctl
    prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_void_p, ctypes.c_ulong, ctypes.c_ulong]
    if prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.addressof(fprog), 0, 0) != 0:
        raise SetupError(f"the sandbox cannot refuse new processes: {os.strerror(ctypes.get_errno())}")


def _take_limits(setup: Message) -> None:
    if setup.get("noSpawnFilter"):
        _refuse_new_processes(base64.b64decode(setup["noSpawnFilter"]))
    limit = _address_space_bytes() + int(setup["memMB"]) * 1024 * 1024
    _setrlimit(resource.RLIMIT_AS, (limit, limit))
    _setrlimit(resource.RLIMIT_CORE, (0, 0))
    tasks = int(setup["maxTasks"])
    _setrlimit(resource.RLIMIT_NPROC, (tasks, tasks))


def _cut(text: object) -> str | None:
    if text is None:
        return None
    try:
        value = str(text)
    except Exception:
        return "(the check's reason cannot be shown)"
    return value if len(value) <= MAX_REASON_CHARS else value[: MAX_REASON_CHARS - 1] + "…"


def _outcome_message(outcome: object) -> Message:
    if not isinstance(outcome, CheckOutcome) or not isinstance(outcome.passed, bool):
        return {"op": "result", "status": "returned", "what": returned_name(outcome)}
    return {
        "op": "result",
        "status": "ok",
        "passed": outcome.passed,
        "reason": _cut(outcome.reason),
        "details": dict(outcome.details or {}),
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
        reply = {"op": "result", "status": "raised", "error": _cut(describe_exception(error))}
    finally:
        signal.setitimer(signal.ITIMER_PROF, 0)
        os.environ.clear()
    if out_of_memory:
        reason = f"memory limit {setup['memMB']} MB exceeded"
        return {"op": "result", "status": "limit", "reason": reason}, True
    return reply, False


def _send_reply(channel: Channel, reply: Message) -> None:
    try:
        size = len(json.dumps(reply, default=repr))
    except Exception as error:
        reply = {"op": "result", "status": "raised", "error": _cut(describe_exception(error))}
        size = 0
    if size > MAX_REPLY_BYTES - 1024:
        reply = {
            "op": "result",
            "status": "error",
            "reason": f"the check's result is larger than {MAX_REPLY_BYTES // 1024} KB",
            "id": reply.get("id"),
        }
    channel.send(reply)


def serve(channel: Channel, handler: Handler, setup: Message) -> int:
    while True:
        try:
            message, _ = channel.receive()
        except ChannelClosed:
            return 0
        if message.get("op") != "call":
            continue
        channel.call_id = message.get("id")
        reply, retire = _call(handler, message, setup)
        reply["id"] = message.get("id")
        try:
            _send_reply(channel, reply)
        except ChannelClosed:
            return 0
        if retire:
            return EXIT_RETIRED


def _describe(module: str) -> Message:
    """Import a pack here, in the sandbox, and describe its checks as data for the console."""
    from guardrails.engine.packs import PackError, load_pack

    try:
        pack = load_pack(module)
    except PackError as error:
        return {"op": "described", "ok": False, "error": _cut(str(error))}
    except MemoryError:
        return {"op": "described", "ok": False, "error": "memory limit exceeded while importing"}
    checks = [
        {
            "id": check.id,
            "kind": check.kind,
            "configSchema": check.config_schema,
            "description": check.description,
            "module": check.module,
            "function": check.function,
            "validatesInCode": check.validates_in_code,
            "stages": list(check.stages),
        }
        for check in pack.checks
    ]
    return {"op": "described", "ok": True, "version": pack.version, "checks": checks}


def main() -> int:
    """Standard input is the channel; the first message is the setup (handler, posture)."""
    channel = Channel(socket.socket(fileno=os.dup(0)))
    os.close(0)
    os.open(os.devnull, os.O_RDONLY)
    setup, _ = channel.receive()
    sys.path[:0] = [p for p in setup.get("sysPath") or () if p not in sys.path]
    os.environ.clear()
    channel.call_id = "setup"
    try:
        _take_limits(setup)
        if setup["network"] == "allowlist":
            install_brokered_sockets(channel)
        _install_guard()
        signal.setitimer(signal.ITIMER_PROF, setup["cpuMs"] / 1000)
        if setup["op"] == "describe":
            channel.send({**_describe(setup["module"]), "id": "setup"})
            return 0
        handler = _import_handler(setup["module"], setup["function"])
        signal.setitimer(signal.ITIMER_PROF, 0)
    except SetupError as error:
        channel.send({"op": "ready", "ok": False, "error": str(error), "id": "setup"})
        return 1
    channel.send({"op": "ready", "ok": True, "id": "setup"})
    return serve(channel, handler, setup)
