"""The hostile pack (tests/packs/hostile.py) under every posture each attack applies to.

One test per finding of the hostile-author review. A check that got through reports
`fail: escaped: ...`; contained means anything else (a pass, or an error: a limit, a
refusal), and what can be seen from outside (the listener, leftover processes, the
console's own stderr and descriptors) agrees.
"""

from __future__ import annotations

import json
import os
import socket
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from guardrails.engine.sandbox import HandlerRef, SandboxDefaults, SandboxError, SandboxPool, posture_for
from guardrails.engine.types import CheckOutcome
from tests.guardrails.conftest import manage_guardrail_ci

LIMITS = {"memMB": 64, "cpuMs": 1000}
POSTURES = {
    "context-isolated": {"sandbox": "context-isolated", "limits": LIMITS},
    "strict, network none": {"sandbox": "strict", "network": {"kind": "none"}, "limits": LIMITS},
    "strict, allowlist": {
        "sandbox": "strict",
        "network": {"kind": "allowlist", "hosts": ["192.0.2.10"]},
        "limits": LIMITS,
    },
}
CUT_OFF = ["strict, network none", "strict, allowlist"]
TRACE = {"output": "hello"}


@pytest.fixture(scope="module")
def hostile_pool() -> Iterator[SandboxPool]:
    with SandboxPool(SandboxDefaults(mem_mb=64, cpu_ms=1000, pool_size=1)) as pool:
        yield pool


def attempt(
    pool: SandboxPool, posture: str, name: str, tenant: str = "acme", **config: Any
) -> CheckOutcome | SandboxError:
    """Run one hostile check; its outcome, or the error the sandbox gave instead."""
    document = POSTURES[posture] if isinstance(posture, str) else posture
    try:
        return pool.run(
            posture_for(document, pool.defaults),
            HandlerRef("tests.packs.hostile", name),
            {"console_pid": os.getpid(), **config},
            TRACE,
            tenant=tenant,
        )
    except SandboxError as error:
        return error


def contained(result: CheckOutcome | SandboxError) -> bool:
    return isinstance(result, SandboxError) or not (result.reason or "").startswith("escaped")


def assert_healthy(pool: SandboxPool, posture: str) -> None:
    document = POSTURES[posture]
    outcome = pool.run(
        posture_for(document, pool.defaults), HandlerRef("tests.packs.handlers", "says_hello"), {"word": "hello"}, TRACE
    )
    assert outcome.passed


@pytest.mark.parametrize("posture", CUT_OFF)
@pytest.mark.parametrize("name", ["setns_through_fork_exec", "setns_through_ctypes"])
def test_no_check_reaches_the_consoles_network_namespace(hostile_pool, listener, posture, name):
    result = attempt(hostile_pool, posture, name, port=listener.port)
    assert contained(result), result
    assert listener.connections == 0


@pytest.mark.parametrize("posture", POSTURES)
def test_no_check_reads_the_consoles_environment(hostile_pool, posture):
    assert contained(attempt(hostile_pool, posture, "reads_parent_environ"))


@pytest.mark.parametrize("posture", POSTURES)
def test_no_check_reads_or_opens_the_consoles_memory(hostile_pool, posture):
    needle = f"acme-trace-{uuid.uuid4().hex}"
    kept_in_the_console = [needle.upper().lower()]  # a copy that lives in this process
    assert contained(attempt(hostile_pool, posture, "reads_console_memory", needle=needle))
    assert kept_in_the_console


@pytest.mark.parametrize("posture", POSTURES)
def test_no_check_kills_the_console(hostile_pool, posture):
    assert contained(attempt(hostile_pool, posture, "kills_the_console"))
    assert_healthy(hostile_pool, posture)  # we are still here, and so is the pool


@pytest.fixture
def udp_receivers() -> Iterator[tuple[socket.socket, socket.socket]]:
    allowed = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    other = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    for sock in (allowed, other):
        sock.bind(("127.0.0.1", 0))
        sock.settimeout(0.5)
    yield allowed, other
    allowed.close()
    other.close()


def test_udp_goes_only_to_the_allowed_host_through_the_relay(hostile_pool, udp_receivers):
    allowed, other = udp_receivers
    posture = {**POSTURES["strict, allowlist"], "network": {"kind": "allowlist", "hosts": ["127.0.0.1"]}}
    result = attempt(
        hostile_pool,
        posture,  # type: ignore[arg-type]
        "udp_beyond_the_allowlist",
        allowed_port=allowed.getsockname()[1],
        other_port=other.getsockname()[1],
    )
    assert contained(result), result
    assert allowed.recv(100) == b"allowed"
    with pytest.raises(TimeoutError):
        other.recv(100)


@pytest.mark.parametrize("posture", POSTURES)
def test_a_child_runs_as_the_sandbox_user_not_root(hostile_pool, posture):
    assert contained(attempt(hostile_pool, posture, "runs_a_shell_as_root"))


def processes_with(marker: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if marker.encode() in (entry / "cmdline").read_bytes():
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


@pytest.mark.parametrize("posture", POSTURES)
def test_no_child_outlives_its_killed_sandbox(hostile_pool, posture):
    marker = f"kindgi-hostile-{uuid.uuid4().hex}"
    result = attempt(hostile_pool, posture, "leaves_a_child_behind", marker=marker)
    assert isinstance(result, SandboxError)
    # strict starts no child at all; context-isolated's is killed with the sandbox
    assert ("Operation not permitted" if posture in CUT_OFF else "wall-clock bound") in str(result)
    deadline = time.monotonic() + 3
    while processes_with(marker) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert processes_with(marker) == []


@pytest.mark.parametrize("posture", POSTURES)
def test_children_share_one_memory_limit(hostile_pool, posture):
    assert contained(attempt(hostile_pool, posture, "children_share_the_memory"))


@pytest.mark.parametrize("posture", CUT_OFF)
def test_strict_starts_no_process_nor_program_by_any_means(hostile_pool, posture):
    result = attempt(hostile_pool, posture, "starts_processes_every_way")
    assert isinstance(result, CheckOutcome) and result.passed, result
    for way in ("fork_exec", "fork", "posix_spawn", "execv"):
        assert f"{way}: EPERM" in (result.reason or ""), result.reason
    assert_healthy(hostile_pool, posture)


@pytest.mark.parametrize("posture", POSTURES)
def test_the_number_of_processes_is_bounded(hostile_pool, posture):
    assert contained(attempt(hostile_pool, posture, "forks_without_end"))


@pytest.mark.parametrize("posture", POSTURES)
def test_a_thread_left_spinning_after_the_verdict_stops_the_sandbox(hostile_pool, posture):
    result = attempt(hostile_pool, posture, "spins_after_its_verdict")
    assert isinstance(result, SandboxError)
    assert "kept a thread or a process running after its verdict" in str(result)
    assert_healthy(hostile_pool, posture)


@pytest.mark.parametrize("posture", POSTURES)
def test_an_early_forged_verdict_and_work_after_it_stop_the_sandbox(hostile_pool, posture):
    result = attempt(hostile_pool, posture, "forges_an_early_verdict", passed=True, spin_s=3.0)
    assert isinstance(result, SandboxError), result
    assert "running after its verdict" in str(result)


@pytest.mark.parametrize("posture", POSTURES)
def test_a_forged_passed_that_is_not_a_bool_is_an_error_and_no_stale_verdict_follows(hostile_pool, posture):
    result = attempt(hostile_pool, posture, "forges_an_early_verdict", passed="no")
    assert isinstance(result, SandboxError)
    assert "passed is not a bool" in str(result)
    for _ in range(2):  # the frames without this call's id were dropped, not queued
        assert_healthy(hostile_pool, posture)


def test_a_module_that_hoards_memory_at_import_is_stopped_by_the_limit(hostile_pool):
    posture = posture_for(POSTURES["strict, network none"], hostile_pool.defaults)
    with pytest.raises(SandboxError, match="memory limit"):
        hostile_pool.run(posture, HandlerRef("tests.packs.hostile_import", "never_called"), {}, TRACE)


def test_a_module_that_spins_at_import_is_stopped_by_the_cpu_limit(hostile_pool):
    posture = posture_for(POSTURES["strict, network none"], hostile_pool.defaults)
    started = time.monotonic()
    with pytest.raises(SandboxError, match="CPU limit 1000 ms exceeded"):
        hostile_pool.run(posture, HandlerRef("tests.packs.hostile_import_spin", "never_called"), {}, TRACE)
    assert time.monotonic() - started < 10


@pytest.mark.parametrize("posture", POSTURES)
def test_tmpfs_and_dev_shm_writes_count_against_the_limit(hostile_pool, posture):
    assert contained(attempt(hostile_pool, posture, "writes_to_dev_shm"))


@pytest.mark.parametrize("posture", POSTURES)
def test_a_huge_reason_is_cut_to_4_kb(hostile_pool, posture):
    result = attempt(hostile_pool, posture, "huge_reason", mb=30)
    assert isinstance(result, CheckOutcome) and not result.passed
    assert len(result.reason or "") <= 4096


@pytest.mark.parametrize("name", ["huge_details", "huge_frame"])
def test_a_reply_over_64_kb_is_an_error(hostile_pool, name):
    result = attempt(hostile_pool, "strict, network none", name, mb=2)
    assert isinstance(result, SandboxError)
    assert "larger than 64 KB" in str(result)
    assert_healthy(hostile_pool, "strict, network none")


def test_a_warm_worker_never_carries_one_tenants_trace_to_another(hostile_pool):
    posture = posture_for(POSTURES["strict, network none"], hostile_pool.defaults)
    handler = HandlerRef("tests.packs.hostile", "remembers_traces")
    canary = f"acme-secret-{uuid.uuid4().hex}"
    assert hostile_pool.run(posture, handler, {}, {"output": canary}, tenant="acme").passed
    globex = hostile_pool.run(posture, handler, {}, {"output": "globex"}, tenant="globex")
    assert globex.passed and canary not in str(globex)
    again = hostile_pool.run(posture, handler, {}, {"output": "acme 2"}, tenant="acme")
    assert canary in (again.reason or "")  # the same tenant's worker stays warm


@pytest.mark.parametrize("posture", CUT_OFF)
def test_unix_datagrams_reach_nothing_of_the_host(hostile_pool, posture, tmp_path):
    path = tmp_path / "host.sock"
    abstract = f"kindgi-{uuid.uuid4().hex}"
    receivers = [socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) for _ in range(2)]
    receivers[0].bind(str(path))
    receivers[1].bind("\0" + abstract)
    try:
        result = attempt(hostile_pool, posture, "datagram_to_the_host", path=str(path), abstract=abstract)
        assert contained(result)
        for receiver in receivers:
            receiver.settimeout(0.2)
            with pytest.raises(TimeoutError):
                receiver.recv(100)
    finally:
        for receiver in receivers:
            receiver.close()


def test_a_check_cannot_write_into_the_consoles_log(hostile_pool, capfd):
    marker = f"kindgi-forged-{uuid.uuid4().hex}"
    assert contained(attempt(hostile_pool, "strict, network none", "writes_to_stderr", marker=marker))
    out, err = capfd.readouterr()
    assert marker not in out + err


@pytest.mark.parametrize(("name", "reason"), [("aborts", "killed by SIGABRT"), ("exits", "exited with status 7")])
def test_a_worker_that_dies_on_its_own_is_reported_as_it_died(hostile_pool, name, reason):
    result = attempt(hostile_pool, "strict, network none", name)
    assert isinstance(result, SandboxError)
    assert reason in str(result)
    assert "SIGKILL" not in str(result)


def test_restarting_workers_leaks_no_descriptor_in_the_console(hostile_pool):
    attempt(hostile_pool, "strict, network none", "exits")
    before = len(os.listdir("/proc/self/fd"))
    for _ in range(10):
        attempt(hostile_pool, "strict, network none", "exits")
    assert len(os.listdir("/proc/self/fd")) <= before


@pytest.fixture
def pool_without_cgroup(monkeypatch) -> Iterator[SandboxPool]:
    """A pool on a host that gives no writable control group: rlimits and /proc only."""
    from guardrails.engine.sandbox import process

    monkeypatch.setattr(process, "layout", lambda: None)
    with SandboxPool(SandboxDefaults(mem_mb=64, cpu_ms=1000, pool_size=1)) as pool:
        yield pool


def test_without_a_control_group_work_left_after_the_verdict_still_stops_the_sandbox(pool_without_cgroup):
    cases: list[tuple[str, dict[str, Any]]] = [
        ("spins_after_its_verdict", {}),
        ("forges_an_early_verdict", {"passed": True, "spin_s": 3.0}),
    ]
    for name, config in cases:
        result = attempt(pool_without_cgroup, "strict, network none", name, **config)
        assert isinstance(result, SandboxError)
        assert "running after its verdict" in str(result)
        assert_healthy(pool_without_cgroup, "strict, network none")


def test_without_a_control_group_strict_children_cannot_share_out_the_memory(pool_without_cgroup):
    # Only the control group bounds children together; strict has none to bound.
    result = attempt(pool_without_cgroup, "strict, network none", "children_share_the_memory")
    assert contained(result)
    assert "EPERM" in str(result) or "Operation not permitted" in str(result), result


def test_without_a_control_group_no_child_outlives_its_sandbox(pool_without_cgroup):
    marker = f"kindgi-hostile-{uuid.uuid4().hex}"
    result = attempt(pool_without_cgroup, "context-isolated", "leaves_a_child_behind", marker=marker)
    assert isinstance(result, SandboxError)
    deadline = time.monotonic() + 3
    while processes_with(marker) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert processes_with(marker) == []


def test_the_ci_command_survives_the_hostile_pack_and_reports(tmp_path):
    """`guardrail_ci` in its own process: the checks that tried to kill it or leave work
    behind give errors, the benign one passes, and the report is written."""
    names = ["kills_the_console", "spins_after_its_verdict", "huge_reason", "aborts"]
    documents = [
        {
            "id": f"g-{n}",
            "kind": "zero-llm",
            "check": f"hostile-{n.replace('_', '-')}",
            "config": {"console_pid": os.getpid(), "mb": 30},
            "action": {"on-violation": "log-only"},
            "sandbox": "strict",
            "limits": LIMITS,
        }
        for n in names
    ] + [
        {
            "id": "benign",
            "kind": "zero-llm",
            "check": "says-word",
            "config": {"word": "hello"},
            "action": {"on-violation": "log-only"},
            "sandbox": "strict",
        }
    ]
    trace = {"id": "t1", "agent": "a", "startedAt": "2026-01-01T00:00:00Z", "output": "hello"}
    run = manage_guardrail_ci(tmp_path, documents, [trace], "tests.packs.hostile,tests.packs.greetings", timeout=300)
    assert run.returncode >= 0, run.stderr
    results = {r["guardrail"]: r for r in json.loads(run.stdout)["results"]}
    assert results["benign"]["status"] == "pass"
    assert results["g-spins_after_its_verdict"]["status"] == "error"
    assert len(results["g-huge_reason"]["reason"]) <= 4096
    assert "SIGABRT" in results["g-aborts"]["reason"]
