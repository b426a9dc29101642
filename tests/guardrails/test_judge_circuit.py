"""The judge's circuit breaker over real sockets: a port that refuses, a provider answering 500."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from guardrails.engine.judge import (
    CircuitBreaker,
    CircuitPolicy,
    JudgeCall,
    JudgeModel,
    MemoryCircuitStore,
    RetryPolicy,
    build_prompt,
    call_judge,
)
from tests.fakeproviders import Answer, FakeProvider, Fault
from tests.traces.workers import free_port

PROMPT = build_prompt("Never promise a refund.", "pass-fail", {"output": "No refunds, sorry."})
FAST = RetryPolicy(max_attempts=4, base_delay_s=0.01, max_delay_s=0.02)
POLICY = CircuitPolicy(failures=3, window_s=60, cooldown_s=30)


class Clock:
    """Wall-clock time the test moves by hand."""

    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def http() -> Iterator[httpx.Client]:
    with httpx.Client() as client:
        yield client


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def breaker(clock: Clock) -> CircuitBreaker:
    return CircuitBreaker(MemoryCircuitStore(clock=clock), POLICY, clock=clock)


def model_at(base_url: str, name: str = "fake-openai-judge") -> JudgeModel:
    return JudgeModel.from_dict(
        {
            "id": "judge",
            "provider": "openai",
            "model": name,
            "baseUrl": base_url,
            "apiKeyEnv": None,
            "pricing": {"inputUsdPerMTok": "1", "outputUsdPerMTok": "2"},
        }
    )


def call(model: JudgeModel, http: httpx.Client, breaker: CircuitBreaker, **kwargs: Any) -> JudgeCall:
    deadline = time.monotonic() + 5.0
    return call_judge(model, PROMPT, http=http, deadline=deadline, retry=FAST, circuit=breaker, **kwargs)


def test_it_opens_after_connections_refused_and_then_fails_calls_at_once(
    http: httpx.Client, breaker: CircuitBreaker
) -> None:
    down = model_at(f"http://127.0.0.1:{free_port()}/v1")
    first = call(down, http, breaker)  # 3 refused attempts of 4: the circuit opens mid-call
    assert first.attempts == 3
    assert first.error is not None and first.error.startswith("provider unavailable (3 failures in a row")
    assert breaker.view(down).status == "open"

    refused = call(down, http, breaker)
    assert refused.attempts == 0  # no attempt: nothing reached for, nothing to record
    assert refused.error is not None
    assert "could not reach the judge provider (ConnectError)" in refused.error
    assert "since 2027-01-15T08:00:00Z" in refused.error


def test_an_open_circuit_calls_the_provider_no_more(
    fake_provider: FakeProvider, http: httpx.Client, breaker: CircuitBreaker
) -> None:
    model = model_at(fake_provider.openai_base_url)
    fake_provider.script(Fault(500), Fault(502), Fault(503))
    assert not call(model, http, breaker).ok
    assert len(fake_provider.requests) == 3

    for _ in range(20):
        assert call(model, http, breaker).error.startswith("provider unavailable")
    assert len(fake_provider.requests) == 3


def test_after_the_cool_down_one_probe_that_is_answered_closes_it(
    fake_provider: FakeProvider, http: httpx.Client, breaker: CircuitBreaker, clock: Clock
) -> None:
    model = model_at(fake_provider.openai_base_url)
    fake_provider.script(Fault(500), Fault(500), Fault(500))
    call(model, http, breaker)
    clock.now += POLICY.cooldown_s
    assert breaker.view(model).status == "half-open"

    fake_provider.script(Answer('{"verdict": "PASS"}'))
    probe = call(model, http, breaker)
    assert probe.ok and probe.attempts == 1
    assert breaker.view(model).status == "closed"
    assert call(model, http, breaker).ok  # the provider judges on its own now
    assert len(fake_provider.requests) == 5


def test_a_failed_probe_opens_it_for_another_cool_down(
    fake_provider: FakeProvider, http: httpx.Client, breaker: CircuitBreaker, clock: Clock
) -> None:
    model = model_at(fake_provider.openai_base_url)
    fake_provider.script(Fault(500), Fault(500), Fault(500), Fault(500))
    call(model, http, breaker)
    clock.now += POLICY.cooldown_s

    probe = call(model, http, breaker)
    assert probe.attempts == 1  # the probe, then the reopened circuit stops the retries
    assert breaker.view(model).status == "open"
    assert len(fake_provider.requests) == 4
    clock.now += POLICY.cooldown_s - 1
    assert call(model, http, breaker).attempts == 0


def test_only_one_caller_probes_a_half_open_circuit(
    fake_provider: FakeProvider, breaker: CircuitBreaker, clock: Clock
) -> None:
    model = model_at(fake_provider.openai_base_url)
    for _ in range(POLICY.failures):
        breaker.failed(model, "the judge provider answered HTTP 500")
    clock.now += POLICY.cooldown_s
    assert breaker.refusal(model) is None  # this caller probes
    assert breaker.refusal(model) is not None  # the others still fail at once


def test_a_429_or_a_4xx_is_a_provider_that_is_up(
    fake_provider: FakeProvider, http: httpx.Client, breaker: CircuitBreaker
) -> None:
    model = model_at(fake_provider.openai_base_url)
    fake_provider.script(Fault(429, retry_after="0"), Fault(429, retry_after="0"), Fault(429, retry_after="0"))
    assert call(model, http, breaker).ok
    fake_provider.script(Fault(400), Fault(400), Fault(400))
    for _ in range(3):
        call(model, http, breaker)
    assert breaker.view(model).status == "closed"


def test_failures_spread_beyond_the_window_do_not_open_it(breaker: CircuitBreaker, clock: Clock) -> None:
    model = model_at("http://127.0.0.1:9/v1")
    for _ in range(POLICY.failures - 1):
        breaker.failed(model, "refused")
    clock.now += POLICY.window_s + 1
    breaker.failed(model, "refused")
    assert breaker.view(model).status == "closed"
    assert breaker.view(model).failures == 1


def test_each_endpoint_and_model_has_its_own_circuit(breaker: CircuitBreaker) -> None:
    down = model_at("http://127.0.0.1:9/v1")
    for _ in range(POLICY.failures):
        breaker.failed(down, "refused")
    assert breaker.view(down).status == "open"
    assert breaker.view(model_at("http://127.0.0.1:9/v1", name="another-model")).status == "closed"
    assert breaker.view(model_at("http://127.0.0.1:10/v1")).status == "closed"


def test_a_refused_call_makes_no_http_client(breaker: CircuitBreaker) -> None:
    down = model_at("http://127.0.0.1:9/v1")
    for _ in range(POLICY.failures):
        breaker.failed(down, "refused")

    def no_client() -> httpx.Client:
        raise AssertionError("a client was made for a call the circuit refuses")

    refused = call_judge(down, PROMPT, http=no_client, deadline=time.monotonic() + 5, retry=FAST, circuit=breaker)
    assert refused.attempts == 0 and refused.error is not None
