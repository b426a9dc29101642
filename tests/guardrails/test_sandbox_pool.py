"""The sandbox pool with real worker processes: limits, network, environment, crashes."""

from __future__ import annotations

import os
import time

import pytest

from guardrails.engine.sandbox import HandlerRef, Posture, SandboxDefaults, SandboxError, SandboxPool, posture_for

DEFAULTS = SandboxDefaults(mem_mb=64, cpu_ms=200)
TRACE = {"output": "hello world"}


def handler(name: str) -> HandlerRef:
    return HandlerRef("tests.packs.handlers", name)


def strict(**document: object) -> Posture:
    return posture_for({"sandbox": "strict", **document}, DEFAULTS)


def assert_pool_healthy(pool: SandboxPool, posture: Posture) -> None:
    """A following evaluation under the same posture still gives its verdict."""
    outcome = pool.run(posture, handler("says_hello"), {"word": "hello"}, TRACE)
    assert outcome.passed


def test_it_runs_a_handler_and_reuses_the_warm_worker(pool):
    posture = strict()
    assert pool.run(posture, handler("says_hello"), {"word": "hello"}, TRACE).passed
    started = pool.started
    outcome = pool.run(posture, handler("says_hello"), {"word": "bye"}, TRACE)
    assert not outcome.passed
    assert outcome.reason == "no 'bye' in output"
    assert pool.started == started


def test_it_stops_a_handler_that_allocates_beyond_mem_mb(pool):
    posture = strict(limits={"memMB": 64, "cpuMs": 2000})
    with pytest.raises(SandboxError, match="memory limit 64 MB exceeded"):
        pool.run(posture, handler("allocates"), {"mb": 1024}, TRACE)
    assert_pool_healthy(pool, posture)


def test_it_lets_a_handler_allocate_within_mem_mb(pool):
    posture = strict(limits={"memMB": 64, "cpuMs": 2000})
    assert pool.run(posture, handler("allocates"), {"mb": 16}, TRACE).passed


def test_it_stops_an_endless_loop_shortly_after_the_cpu_limit(pool):
    posture = strict(limits={"memMB": 64, "cpuMs": 200})
    started = time.monotonic()
    with pytest.raises(SandboxError, match="CPU limit 200 ms exceeded"):
        pool.run(posture, handler("loops_forever"), {}, TRACE)
    assert time.monotonic() - started < 2.0
    assert_pool_healthy(pool, posture)


def test_it_stops_a_sleeping_handler_at_the_wall_clock_bound(pool):
    posture = strict(limits={"memMB": 64, "cpuMs": 100})
    started = time.monotonic()
    with pytest.raises(SandboxError, match="wall-clock bound of 1100 ms"):
        pool.run(posture, handler("sleeps"), {"seconds": 30}, TRACE)
    assert time.monotonic() - started < 3.0
    assert_pool_healthy(pool, posture)


def test_network_none_reaches_nothing_not_even_loopback(pool, listener):
    posture = strict(network={"kind": "none"})
    config = {"host": "127.0.0.1", "port": listener.port}
    with pytest.raises(SandboxError, match=r"Connection refused|Network is unreachable"):
        pool.run(posture, handler("connects"), config, TRACE)
    assert listener.connections == 0
    assert_pool_healthy(pool, posture)


def test_a_strict_guardrail_without_network_gets_none(pool, listener):
    config = {"host": "127.0.0.1", "port": listener.port}
    with pytest.raises(SandboxError, match=r"Connection refused|Network is unreachable"):
        pool.run(strict(), handler("connects"), config, TRACE)
    assert listener.connections == 0


def test_an_allowlist_naming_the_host_reaches_it(pool, listener):
    posture = strict(network={"kind": "allowlist", "hosts": ["127.0.0.1"]})
    config = {"host": "127.0.0.1", "port": listener.port}
    assert pool.run(posture, handler("connects"), config, TRACE).passed
    assert listener.connections == 1


def test_the_relay_passes_a_half_close_on_and_still_brings_the_answer(pool, listener):
    posture = strict(network={"kind": "allowlist", "hosts": ["127.0.0.1"]})
    config = {"host": "127.0.0.1", "port": listener.port}
    assert pool.run(posture, handler("half_closes"), config, TRACE).passed
    assert listener.connections == 1


def test_an_allowlist_naming_the_host_by_name_reaches_it(pool, listener):
    posture = strict(network={"kind": "allowlist", "hosts": ["localhost"]})
    config = {"host": "localhost", "port": listener.port}
    assert pool.run(posture, handler("connects"), config, TRACE).passed
    assert listener.connections == 1


def test_an_allowlist_not_naming_the_host_refuses_it(pool, listener):
    posture = strict(network={"kind": "allowlist", "hosts": ["192.0.2.10", "api.example.test"]})
    config = {"host": "127.0.0.1", "port": listener.port}
    with pytest.raises(SandboxError, match=r"the network allowlist does not name 127\.0\.0\.1"):
        pool.run(posture, handler("connects"), config, TRACE)
    assert listener.connections == 0
    assert_pool_healthy(pool, posture)


def test_unrestricted_network_reaches_the_listener(pool, listener):
    posture = strict(network={"kind": "unrestricted"})
    config = {"host": "127.0.0.1", "port": listener.port}
    assert pool.run(posture, handler("connects"), config, TRACE).passed
    assert listener.connections == 1


def test_context_isolated_handler_sees_only_declared_variables(pool):
    posture = posture_for({"sandbox": "context-isolated"}, DEFAULTS)
    env = {"KINDGI_TEST_TOKEN": "s3cret"}
    outcome = pool.run(posture, handler("reads_environment"), {}, TRACE, env)
    assert outcome.details["names"] == ["KINDGI_TEST_TOKEN"]
    assert outcome.details["values"] == env
    # The next call declares nothing and sees nothing: the worker is reused, its env is not.
    outcome = pool.run(posture, handler("reads_environment"), {}, TRACE)
    assert outcome.details["names"] == []


def test_a_handler_cannot_read_the_consoles_environment_through_proc(pool):
    posture = posture_for({"sandbox": "context-isolated"}, DEFAULTS)
    # Its own /proc, in its own PID namespace: the console's pid is not there.
    with pytest.raises(SandboxError, match="FileNotFoundError"):
        pool.run(posture, handler("reads_console_environ"), {"pid": os.getpid()}, TRACE)


def test_a_handler_cannot_signal_the_console(pool):
    with pytest.raises(SandboxError, match=r"does not allow os\.kill outside the worker"):
        pool.run(strict(), handler("kills_parent"), {"pid": os.getpid()}, TRACE)


def test_a_raising_handler_gives_its_exception_and_keeps_the_worker(pool):
    posture = strict()
    for attempt in range(2):
        with pytest.raises(SandboxError, match="check raised ValueError: the check's own bug"):
            pool.run(posture, handler("raises"), {}, TRACE)
        if attempt == 0:
            started = pool.started
    assert pool.started == started  # the second call reused the worker the first one started
    assert_pool_healthy(pool, posture)


def test_a_killed_worker_is_replaced(pool):
    posture = strict()
    with pytest.raises(SandboxError, match="killed by SIGKILL"):
        pool.run(posture, handler("kills_itself"), {}, TRACE)
    assert_pool_healthy(pool, posture)


def test_a_handler_that_cannot_be_imported_is_an_error():
    with SandboxPool(DEFAULTS) as pool, pytest.raises(SandboxError, match="cannot import"):
        pool.run(strict(), HandlerRef("tests.packs.no_such_module", "f"), {}, TRACE)


def test_concurrent_calls_share_the_pool(pool):
    from concurrent.futures import ThreadPoolExecutor

    posture = strict()
    with ThreadPoolExecutor(4) as executor:
        results = list(
            executor.map(lambda i: pool.run(posture, handler("says_hello"), {"word": "hello"}, TRACE), range(20))
        )
    assert all(outcome.passed for outcome in results)


def test_shutdown_stops_the_workers():
    pool = SandboxPool(DEFAULTS)
    pool.run(strict(), handler("says_hello"), {}, TRACE)
    worker_pids = [w.process for slot in pool._slots.values() for w in slot.idle]
    pool.shutdown()
    assert all(process.poll() is not None for process in worker_pids)
    with pytest.raises(SandboxError, match="shut down"):
        pool.run(strict(), handler("says_hello"), {}, TRACE)


def test_every_sandboxed_posture_fails_closed_where_bubblewrap_is_missing(listener):
    config = {"host": "127.0.0.1", "port": listener.port}
    with SandboxPool(DEFAULTS, bwrap="/nonexistent/bwrap") as pool:
        for network in ("none", "allowlist", "unrestricted"):
            posture = strict(network={"kind": network, "hosts": ["127.0.0.1"]})
            with pytest.raises(SandboxError, match=r"bubblewrap.*the check is not run"):
                pool.run(posture, handler("connects"), config, TRACE)
        assert pool.started == 0
    assert listener.connections == 0


def test_an_idle_worker_killed_from_outside_is_replaced_before_use():
    with SandboxPool(DEFAULTS) as pool:
        pool.run(strict(), handler("says_hello"), {}, TRACE)
        [worker] = [w for slot in pool._slots.values() for w in slot.idle]
        worker.process.kill()
        worker.process.wait()
        assert pool.run(strict(), handler("says_hello"), {}, TRACE).passed
        assert pool.started == 2


def test_idle_workers_beyond_max_idle_are_stopped_least_recently_used_first():
    with SandboxPool(SandboxDefaults(mem_mb=64, cpu_ms=200, max_idle=2)) as pool:
        for tenant in ("acme", "globex", "initech", "umbrella"):
            pool.run(strict(), handler("says_hello"), {}, TRACE, tenant=tenant)
        assert pool.idle_workers() == 2
        started = pool.started
        pool.run(strict(), handler("says_hello"), {}, TRACE, tenant="umbrella")
        assert pool.started == started  # the most recent tenant's worker was kept
        pool.run(strict(), handler("says_hello"), {}, TRACE, tenant="acme")
        assert pool.started == started + 1  # the oldest one's was stopped
