"""Rate limits as token buckets in the shared cache: one round trip per request, whatever the rate.

A rate `N/period` (DRF's syntax: `N/second|minute|hour|day`) is a bucket of N tokens that
refills at N per period: a caller may send N requests at once, then one each period/N
seconds; a request that finds no token is refused (429) with `Retry-After`, the seconds until
the next token. DRF's `SimpleRateThrottle` kept the time of every request of the window
instead and read and wrote that list whole on each request: at the runtime path's default of
60,000/minute, a fleet at 500 requests/s made every request move 30,000 entries through the
cache (a millisecond and more of CPU each); a bucket is two numbers.

On Redis the bucket is taken by a Lua script, atomic across processes and machines, in one
round trip; on any other cache (the embedded default's database table) it is read and
written back, which a single process does not race. A cache that cannot be reached lets the
request through (the throttle must not turn a stored trace into an error).
"""

from __future__ import annotations

import abc
import logging
import math
import time
from typing import Any

from django.core.cache import caches
from django.core.cache.backends.base import BaseCache
from django.core.cache.backends.redis import RedisCache
from redis.exceptions import RedisError
from rest_framework.request import Request
from rest_framework.throttling import BaseThrottle

#: What a cache that cannot be reached raises (Redis refused, timed out).
CACHE_DOWN: tuple[type[Exception], ...] = (RedisError, OSError)
PERIODS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
#: The clock buckets are counted on (a test may set another).
_clock = time.time

# KEYS[1]: the bucket (a hash of its tokens `t` and the time `at` they were counted).
# ARGV: capacity, refill per second, now (seconds), the key's lifetime (seconds).
# Answers {1, "0"} when a token was taken, else {0, seconds until there is one}.
TAKE = """
local capacity, refill, now = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local state = redis.call('HMGET', KEYS[1], 't', 'at')
local tokens, at = tonumber(state[1]), tonumber(state[2])
if tokens == nil or at == nil then tokens, at = capacity, now end
tokens = math.min(capacity, tokens + math.max(0, now - at) * refill)
local taken, wait = 0, 0
if tokens >= 1 then tokens, taken = tokens - 1, 1 else wait = (1 - tokens) / refill end
redis.call('HSET', KEYS[1], 't', tostring(tokens), 'at', tostring(now))
redis.call('EXPIRE', KEYS[1], ARGV[4])
return {taken, tostring(wait)}
"""


def parse_rate(rate: str) -> tuple[int, int]:
    """(requests, seconds) of a rate `N/second|minute|hour|day` (DRF's syntax: the period's first letter counts)."""
    number, _, period = rate.partition("/")
    return int(number), PERIODS[period[:1]]


def take(key: str, capacity: int, seconds: int) -> float:
    """Take a token from the bucket `key` of the default cache: 0 when one was taken, else
    the seconds until there is one. Raises CACHE_DOWN's errors when the cache is down."""
    now = _clock()
    refill = capacity / seconds
    backend = caches["default"]
    if isinstance(backend, RedisCache):
        script = _script(backend)
        _, wait = script(keys=[backend.make_key(key)], args=[capacity, repr(refill), repr(now), seconds + 1])
        return float(wait)
    return _take_read_and_written(backend, key, capacity, refill, now, seconds + 1)


def _script(backend: RedisCache) -> Any:
    """The take script registered on one Redis client of `backend`, made once per backend
    (Django's own client is made again for each call, and a client costs more than the call)."""
    script = getattr(backend, "_kindgi_take", None)
    if script is None:
        script = backend._cache.get_client(None, write=True).register_script(TAKE)
        backend._kindgi_take = script  # type: ignore[attr-defined]
    return script


def _take_read_and_written(backend: BaseCache, key: str, capacity: int, refill: float, now: float, ttl: int) -> float:
    tokens, at = backend.get(key) or (float(capacity), now)
    tokens = min(float(capacity), tokens + max(0.0, now - at) * refill)
    wait = 0.0
    if tokens >= 1:
        tokens -= 1
    else:
        wait = (1 - tokens) / refill
    backend.set(key, (tokens, now), ttl)
    return wait


class TokenBucketThrottle(BaseThrottle, abc.ABC):
    """A throttle whose rate (`rate_for`) is a token bucket per caller (`get_cache_key`) in
    the default cache; DRF answers a refusal 429 with `Retry-After` (`wait`, rounded up).
    Abstract: a subclass says whose bucket a request takes from, and at which rate."""

    def __init__(self) -> None:
        self._wait: float | None = None

    @abc.abstractmethod
    def rate_for(self, request: Request) -> str | None:
        """`N/second|minute|hour|day` for this request, or None: not throttled."""

    @abc.abstractmethod
    def get_cache_key(self, request: Request, view: Any) -> str | None:
        """The caller's bucket, or None: not throttled."""

    def allow_request(self, request: Request, view: Any) -> bool:
        rate = self.rate_for(request)
        key = self.get_cache_key(request, view) if rate else None
        if not rate or key is None:
            return True
        capacity, seconds = parse_rate(rate)
        try:
            wait = take(key, capacity, seconds)
        except CACHE_DOWN as error:
            logging.getLogger("kindgi_console.api").warning("throttle skipped: %s", error)
            return True
        self._wait = wait or None
        return not wait

    def wait(self) -> float | None:
        """Seconds until the refused caller has a token (DRF rounds it up for Retry-After)."""
        return None if self._wait is None else max(1.0, math.ceil(self._wait))
