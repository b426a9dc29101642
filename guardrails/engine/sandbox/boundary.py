"""The operating-system boundary around a sandbox worker, built by bubblewrap.

Every sandboxed check runs in a worker started through `bwrap` with:

- its own user, PID, network, IPC, UTS and cgroup namespaces (`--unshare-all`), as user
  65534 with no capabilities, `no_new_privs`, a new session, no further user namespaces;
- its own /proc (it sees only its own processes, never the console's), a minimal /dev;
- a read-only mount namespace holding only the Python runtime (/usr, the interpreter's
  prefix and the virtualenv), the console's `guardrails` package (the worker's code) and
  the check's own package or file; a private tmpfs of at most `memMB` at /tmp and at
  /dev/shm; nothing else of the host (no /etc but its certificates, no /home, no /run);
- a seccomp filter (seccomp_bpf.py) that refuses setns, unshare, mount, ptrace, the pidfd
  calls, bpf, keyctl, perf_event_open and the like; in `strict`, a second one that the
  worker loads before the check's code runs refuses starting processes and programs (fork,
  vfork, clone without CLONE_THREAD, execve), so that the worker is its only process;
- `--die-with-parent`: when the pool kills bwrap, the kernel kills the namespace's init and
  with it every process of the sandbox.

Network `none` and `allowlist` are the empty network namespace; `unrestricted` shares the
host's. Where bwrap, user namespaces or the seccomp bindings are missing, `unavailable()`
says why and sandboxed checks are not run (fail closed).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Sequence
from functools import cache
from importlib.machinery import PathFinder
from pathlib import Path

from guardrails.engine.sandbox.posture import HandlerRef, NetworkPolicy, Posture

SANDBOX_UID = 65534
#: The console's source root (the parent of the `guardrails` package) and that package.
SOURCE_ROOT = Path(__file__).resolve().parents[3]
_GUARDRAILS = SOURCE_ROOT / "guardrails"
_SECCOMP_SCRIPT = Path(__file__).with_name("seccomp_bpf.py")
SYSTEM_PYTHON = "/usr/bin/python3"
_NETWORK_FILES = ("/etc/resolv.conf", "/etc/hosts", "/etc/nsswitch.conf", "/etc/gai.conf")


class BoundaryError(Exception):
    """The OS boundary cannot be built on this host."""


@cache
def seccomp_program(system_python: str = SYSTEM_PYTHON, *, no_spawn: bool = False) -> bytes:
    """The BPF program of the filter, generated once per process by the system interpreter;
    `no_spawn`: the `strict` worker's second filter, refusing new processes and programs."""
    try:
        run = subprocess.run(
            [system_python, "-I", str(_SECCOMP_SCRIPT), *(["--no-spawn"] if no_spawn else [])],
            capture_output=True,
            timeout=30,
            env={},
            check=False,
        )
    except OSError as error:
        raise BoundaryError(f"the seccomp filter cannot be built: {error}") from None
    if run.returncode != 0 or not run.stdout:
        last = (run.stderr.decode(errors="replace").strip().splitlines() or ["no output"])[-1]
        raise BoundaryError(f"the seccomp filter cannot be built ({system_python} with python3-seccomp): {last}")
    return run.stdout


def _code_roots(handler: HandlerRef, sys_path: Sequence[str]) -> list[str]:
    """The files and directories holding the check's code (its top-level package)."""
    if handler.is_path:
        return [handler.module]
    spec = PathFinder.find_spec(handler.module.split(".")[0], list(sys_path))
    if spec is None:
        return []
    if spec.submodule_search_locations:
        return [str(Path(p).resolve()) for p in spec.submodule_search_locations]
    return [str(Path(spec.origin).resolve())] if spec.origin else []


def runtime_paths(python: str) -> list[str]:
    """The interpreter's installation: the virtualenv, its base prefix, and the executable."""
    paths = {os.path.realpath(sys.prefix), os.path.realpath(sys.base_prefix)}
    paths.add(os.path.realpath(os.path.dirname(python)))
    real = os.path.realpath(python)
    if not real.startswith("/usr/"):
        paths.add(os.path.dirname(os.path.dirname(real)))
    return sorted(p for p in paths if not p.startswith("/usr/") and p != "/usr")


class Boundary:
    """Builds the bwrap command line of a worker for a posture and a handler."""

    def __init__(self, bwrap: str | None = None, python: str | None = None) -> None:
        self.bwrap = bwrap if bwrap is not None else (shutil.which("bwrap") or "bwrap")
        self.python = python or sys.executable
        self._probed = False
        self._reason: str | None = None

    def unavailable(self) -> str | None:
        """Why no sandbox can be built here (probed once), or None where it can."""
        if not self._probed:
            self._reason, self._probed = self._probe(), True
        return self._reason

    def _probe(self) -> str | None:
        try:
            program = seccomp_program()
            seccomp_program(no_spawn=True)
        except BoundaryError as error:
            return str(error)
        posture = Posture("strict", 64, 1000, NetworkPolicy("none"))
        argv, fd = self.command(posture, [], program)
        try:
            run = subprocess.run(
                [*argv, self.python, "-I", "-c", "pass"],
                capture_output=True,
                timeout=30,
                pass_fds=(fd,),
                env={},
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired) as error:
            return f"bubblewrap cannot be started ({self.bwrap}): {error}"
        finally:
            os.close(fd)
        if run.returncode != 0:
            detail = run.stderr.decode(errors="replace").strip()[:300] or f"status {run.returncode}"
            return f"the OS sandbox (bubblewrap, user namespaces) cannot be built here: {detail}"
        return None

    def command(self, posture: Posture, code: Sequence[str], program: bytes) -> tuple[list[str], int]:
        """The bwrap argv up to the interpreter, and the seccomp descriptor it reads."""
        fd = os.memfd_create("kindgi-seccomp", 0)
        os.write(fd, program)
        os.lseek(fd, 0, os.SEEK_SET)
        size = str(posture.mem_mb * 1024 * 1024)
        argv = [
            self.bwrap,
            "--unshare-all",
            "--unshare-user",
            "--die-with-parent",
            "--new-session",
            "--uid",
            str(SANDBOX_UID),
            "--gid",
            str(SANDBOX_UID),
            "--disable-userns",
            "--cap-drop",
            "ALL",
            "--hostname",
            "sandbox",
            "--clearenv",
            "--proc",
            "/proc",
            "--dev",
            "/dev",
            # The sandbox's own tmpfs mounts, not the host's /tmp or /dev/shm.
            "--size",
            size,
            "--tmpfs",
            "/dev/shm",  # noqa: S108
            "--size",
            size,
            "--tmpfs",
            "/tmp",  # noqa: S108
            "--ro-bind",
            "/usr",
            "/usr",
            "--symlink",
            "usr/lib",
            "/lib",
            "--symlink",
            "usr/lib64",
            "/lib64",
            "--symlink",
            "usr/bin",
            "/bin",
            "--symlink",
            "usr/sbin",
            "/sbin",
            "--ro-bind-try",
            "/etc/ssl",
            "/etc/ssl",
            "--ro-bind-try",
            "/etc/ca-certificates",
            "/etc/ca-certificates",
        ]
        if posture.network.kind == "unrestricted":
            argv.append("--share-net")
            for path in _NETWORK_FILES:
                argv += ["--ro-bind-try", path, path]
        for path in [*runtime_paths(self.python), str(_GUARDRAILS), *code]:
            argv += ["--ro-bind", path, path]
        argv += ["--remount-ro", "/", "--chdir", "/tmp", "--setenv", "HOME", "/tmp"]  # noqa: S108
        argv += ["--seccomp", str(fd), "--"]
        return argv, fd

    def worker_command(self, posture: Posture, handler: HandlerRef, sys_path: Sequence[str]) -> tuple[list[str], int]:
        """The full argv of a worker for `handler` and its seccomp descriptor."""
        argv, fd = self.command(posture, _code_roots(handler, sys_path), seccomp_program())
        return [*argv, self.python, "-I", "-c", _BOOTSTRAP], fd


_BOOTSTRAP = (
    f"import sys; sys.path.insert(0, {str(SOURCE_ROOT)!r}); "
    "from guardrails.engine.sandbox.worker import main; sys.exit(main())"
)


@cache
def host_boundary() -> Boundary:
    """This process's boundary with the host's bwrap (probed once)."""
    return Boundary()


def host_postures() -> list[tuple[str, bool, str]]:
    """Which postures this host enforces: (posture, enforced, what enforces it or why not)."""
    from guardrails.engine.sandbox.cgroup import layout

    reason = host_boundary().unavailable()
    if reason is not None:
        refused = f"not enforced, such checks answer error: {reason}"
        return [
            ("none", True, "in process: nothing enforced"),
            ("context-isolated", False, refused),
            ("strict", False, refused),
        ]
    where = layout()
    limits = (
        f"cgroup v{where.version} (memory with children and tmpfs, tasks)"
        if where is not None
        else "per-process rlimits and the PID namespace (no writable cgroup here)"
    )
    boundary = f"bubblewrap, user/PID/network/mount namespaces, seccomp; limits: {limits}"
    return [
        ("none", True, "in process: nothing enforced"),
        ("context-isolated", True, boundary),
        ("strict", True, f"{boundary}; no process or program started after the worker (seccomp)"),
    ]
