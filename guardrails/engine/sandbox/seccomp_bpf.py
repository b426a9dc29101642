"""The sandbox's seccomp filter, written as a BPF program to standard output.

Run by the system interpreter (`/usr/bin/python3 -I seccomp_bpf.py`), which has libseccomp's
bindings from Debian's `python3-seccomp`; the console's own interpreter (a virtualenv) need
not have them. The pool passes the program to bubblewrap (`--seccomp FD`), which loads it
in the sandbox just before the worker's interpreter starts, after `no_new_privs`.

Everything is allowed except what would reach out of the sandbox's namespaces or into the
kernel's shared state: those calls fail with EPERM (ENOSYS for clone3, so that the C
library falls back to clone, whose namespace flags are checked).

With `--no-spawn`, the second filter of a `strict` worker: it refuses (EPERM) starting a
process or a program, fork, vfork, clone without CLONE_THREAD (what fork, vfork and
posix_spawn are made of), execve and execveat, and leaves threads. bubblewrap cannot load it
(it must still exec the interpreter): the worker loads it itself, stacked on the first,
before the check's module is imported (worker.py).
"""

import sys

DENIED = (
    "setns",
    "unshare",
    "mount",
    "umount2",
    "pivot_root",
    "chroot",
    "move_mount",
    "open_tree",
    "fsopen",
    "fsconfig",
    "fsmount",
    "fspick",
    "mount_setattr",
    "ptrace",
    "process_vm_readv",
    "process_vm_writev",
    "kcmp",
    "pidfd_open",
    "pidfd_send_signal",
    "pidfd_getfd",
    "bpf",
    "perf_event_open",
    "userfaultfd",
    "keyctl",
    "add_key",
    "request_key",
    "kexec_load",
    "kexec_file_load",
    "init_module",
    "finit_module",
    "delete_module",
    "open_by_handle_at",
    "name_to_handle_at",
    "io_uring_setup",
    "io_uring_enter",
    "io_uring_register",
    "acct",
    "swapon",
    "swapoff",
    "reboot",
    "syslog",
    "quotactl",
    "sethostname",
    "setdomainname",
    "lookup_dcookie",
    "fanotify_init",
    "vhangup",
    "iopl",
    "ioperm",
    "settimeofday",
    "clock_settime",
    "adjtimex",
    "clock_adjtime",
)
#: CLONE_NEWNS, NEWCGROUP, NEWUTS, NEWIPC, NEWUSER, NEWPID, NEWNET, NEWTIME: clone with any
#: of them would make a new namespace.
NAMESPACE_FLAGS = (0x00020000, 0x02000000, 0x04000000, 0x08000000, 0x10000000, 0x20000000, 0x40000000, 0x80)
EPERM, ENOSYS = 1, 38
CLONE_THREAD = 0x00010000
SPAWN_CALLS = ("fork", "vfork", "execve", "execveat")


def build() -> object:
    import seccomp  # type: ignore[import-not-found]

    flt = seccomp.SyscallFilter(defaction=seccomp.ALLOW)
    for name in DENIED:
        try:
            flt.add_rule(seccomp.ERRNO(EPERM), name)
        except (RuntimeError, ValueError, OSError):
            continue  # a call this kernel or architecture does not have
    flt.add_rule(seccomp.ERRNO(ENOSYS), "clone3")
    for flag in NAMESPACE_FLAGS:
        flt.add_rule(seccomp.ERRNO(EPERM), "clone", seccomp.Arg(0, seccomp.MASKED_EQ, flag, flag))
    # TIOCSTI would push input into a terminal outside; bubblewrap's --new-session also stops it.
    flt.add_rule(seccomp.ERRNO(EPERM), "ioctl", seccomp.Arg(1, seccomp.MASKED_EQ, 0xFFFFFFFF, 0x5412))
    return flt


def build_no_spawn() -> object:
    import seccomp

    flt = seccomp.SyscallFilter(defaction=seccomp.ALLOW)
    for name in SPAWN_CALLS:
        try:
            flt.add_rule(seccomp.ERRNO(EPERM), name)
        except (RuntimeError, ValueError, OSError):
            continue  # a call this architecture does not have (fork, vfork on arm64)
    flt.add_rule(seccomp.ERRNO(EPERM), "clone", seccomp.Arg(0, seccomp.MASKED_EQ, CLONE_THREAD, 0))
    flt.add_rule(seccomp.ERRNO(ENOSYS), "clone3")
    return flt


if __name__ == "__main__":
    sys.stdout.flush()
    (build_no_spawn() if "--no-spawn" in sys.argv[1:] else build()).export_bpf(sys.stdout)  # type: ignore[attr-defined]
