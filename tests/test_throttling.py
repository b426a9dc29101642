"""The API's throttles are token buckets in the shared cache: a burst of the rate, then one
request each period/N, a refusal saying how long to wait, per caller, on Redis (one script,
atomic) and on any other cache (the embedded default's database table) alike."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django.core.cache import caches
from django.test import override_settings
from redis.exceptions import ConnectionError as RedisConnectionError

from kindgi_console import throttling
from kindgi_console.throttling import parse_rate, take
from tests.conftest import make_trace

LOCAL = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache", "LOCATION": "throttle-tests"}}


class Clock:
    """The throttle's clock, moved by the test (no test waits on the real one)."""

    def __init__(self) -> None:
        self.now = 1_700_000_000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    clock = Clock()
    monkeypatch.setattr(throttling, "_clock", clock)
    return clock


@pytest.fixture(params=["shared cache", "local cache"])
def cache_kind(request: pytest.FixtureRequest, db: Any) -> Iterator[str]:
    """The default cache (Redis where the suite runs on it, else a database table) and a
    cache in the process."""
    if request.param == "shared cache":
        yield request.param
        return
    with override_settings(CACHES=LOCAL):
        caches["default"].clear()
        yield request.param


def test_a_rate_is_requests_per_period_in_drfs_syntax() -> None:
    assert parse_rate("60000/minute") == (60000, 60)
    assert parse_rate("5/s") == (5, 1)
    assert parse_rate("10/hour") == (10, 3600)
    assert parse_rate("2/day") == (2, 86400)


def test_a_bucket_lets_a_burst_of_its_rate_through_then_says_when_the_next_token_comes(
    clock: Clock, cache_kind: str
) -> None:
    assert [take("t:burst", 3, 60) for _ in range(3)] == [0, 0, 0]
    assert take("t:burst", 3, 60) == pytest.approx(20)  # 3 a minute: one every 20 s
    clock.now += 5
    assert take("t:burst", 3, 60) == pytest.approx(15)  # a refusal takes nothing


def test_a_bucket_refills_at_its_rate_up_to_its_size(clock: Clock, cache_kind: str) -> None:
    for _ in range(3):
        take("t:refill", 3, 60)
    clock.now += 40  # two tokens back
    assert [take("t:refill", 3, 60) > 0 for _ in range(3)] == [False, False, True]
    clock.now += 3600  # an hour idle fills it, and no more than full
    assert [take("t:refill", 3, 60) > 0 for _ in range(4)] == [False, False, False, True]


def test_each_caller_has_a_bucket_of_its_own(clock: Clock, cache_kind: str) -> None:
    assert take("t:alice", 1, 60) == 0
    assert take("t:alice", 1, 60) > 0
    assert take("t:bob", 1, 60) == 0


def test_the_runtime_limit_answers_429_with_the_seconds_until_the_next_token(
    api: Any, acme_key: str, settings: Any, clock: Clock
) -> None:
    settings.KINDGI_RUNTIME_RATE = "2/minute"

    def evaluate(n: int) -> Any:
        return api(acme_key).post("/api/v1/evaluate?store=false", data=make_trace(f"t-{n}"), format="json")

    assert [evaluate(n).status_code for n in range(2)] == [200, 200]
    refused = evaluate(2)
    assert refused.status_code == 429 and refused["Retry-After"] == "30"
    clock.now += 30
    assert evaluate(3).status_code == 200


def test_a_cache_that_cannot_be_reached_lets_requests_through(
    api: Any, acme_key: str, settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings.KINDGI_RUNTIME_RATE = "1/minute"

    def down(*args: Any) -> float:
        raise RedisConnectionError("refused")

    monkeypatch.setattr(throttling, "take", down)
    statuses = [
        api(acme_key).post("/api/v1/evaluate?store=false", data=make_trace(f"d-{n}"), format="json").status_code
        for n in range(3)
    ]
    assert statuses == [200, 200, 200]
