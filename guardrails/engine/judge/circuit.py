"""A circuit breaker per judge provider endpoint and model.

A provider that is down made every verdict slow: each judge call retried connection refused
with backoff (2 to 3 s a call), call after call. The breaker counts the consecutive attempts
that failed as an unavailable provider does (connection errors, timeouts, HTTP 5xx; not 429,
which is a provider asking to slow down, nor other 4xx) on one endpoint and model. After
`failures` of them within `window_s` seconds it opens: every attempt fails at once with
``provider unavailable (…since …)`` for `cooldown_s` seconds. Then one attempt, the probe,
is let through (half-open): its answer closes the circuit, its failure opens it again.

The state lives in a CircuitStore, so the caller decides how widely it is shared: the
console keeps it in its cache (every process, runs and the runtime path alike), the CI
command and tests in memory. Times are wall-clock (time.time), so that processes agree.
Updates are read-modify-write: two processes failing at once may count one failure fewer,
which delays the opening by an attempt and costs nothing else.
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any, Literal, Protocol

from .models import JudgeModel

Status = Literal["closed", "open", "half-open"]


@dataclass(frozen=True, slots=True)
class CircuitPolicy:
    """When a circuit opens and for how long: `failures` in `window_s`, then `cooldown_s`."""

    failures: int = 5
    window_s: float = 60.0
    cooldown_s: float = 30.0


@dataclass(frozen=True, slots=True)
class CircuitState:
    """One circuit's record: the failures in a row since `first_failure_at`, and when it
    opened (None: closed) because of `last_error`."""

    failures: int = 0
    first_failure_at: float | None = None
    opened_at: float | None = None
    last_error: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "failures": self.failures,
            "firstFailureAt": self.first_failure_at,
            "openedAt": self.opened_at,
            "lastError": self.last_error,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CircuitState:
        return cls(
            failures=int(data.get("failures") or 0),
            first_failure_at=data.get("firstFailureAt"),
            opened_at=data.get("openedAt"),
            last_error=str(data.get("lastError") or ""),
        )


class CircuitStore(Protocol):
    """Where circuits are kept. `claim` is atomic: True for one caller per `key` until
    `ttl_s` seconds pass (the half-open probe)."""

    def get(self, key: str) -> CircuitState | None: ...

    def put(self, key: str, state: CircuitState, ttl_s: float) -> None: ...

    def claim(self, key: str, ttl_s: float) -> bool: ...

    def release(self, key: str) -> None: ...


@dataclass
class MemoryCircuitStore:
    """CircuitStore of one process (the CI command, tests)."""

    clock: Callable[[], float] = time.time

    def __post_init__(self) -> None:
        self._states: dict[str, CircuitState] = {}
        self._claims: dict[str, float] = {}
        self._lock = threading.Lock()

    def get(self, key: str) -> CircuitState | None:
        return self._states.get(key)

    def put(self, key: str, state: CircuitState, ttl_s: float) -> None:
        self._states[key] = state

    def claim(self, key: str, ttl_s: float) -> bool:
        with self._lock:
            if self._claims.get(key, 0.0) > self.clock():
                return False
            self._claims[key] = self.clock() + ttl_s
            return True

    def release(self, key: str) -> None:
        with self._lock:
            self._claims.pop(key, None)


def circuit_key(model: JudgeModel) -> str:
    """The circuit of a model: its provider, endpoint and model name (not the console's id,
    so that two registrations of one endpoint and model share it)."""
    parts = "\x1f".join([model.provider, model.base_url, model.model])
    return hashlib.sha256(parts.encode()).hexdigest()[:32]


@dataclass(frozen=True, slots=True)
class CircuitView:
    """A circuit as pages and the API show it."""

    status: Status
    failures: int
    since: float | None
    retry_at: float | None
    last_error: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "state": self.status,
            "failures": self.failures,
            "since": _iso(self.since),
            "retryAt": _iso(self.retry_at),
            "lastError": self.last_error or None,
        }


@dataclass
class CircuitBreaker:
    """The breaker over a store: `refusal` before an attempt, `failed` / `succeeded` after."""

    store: CircuitStore
    policy: CircuitPolicy = CircuitPolicy()
    clock: Callable[[], float] = time.time

    def refusal(self, model: JudgeModel) -> str | None:
        """Why an attempt on `model` must fail at once, or None: it may go (closed, or this
        caller holds the half-open probe)."""
        key = circuit_key(model)
        state = self.store.get(key)
        if state is None or state.opened_at is None:
            return None
        if self.clock() >= state.opened_at + self.policy.cooldown_s and self.store.claim(key, self.policy.cooldown_s):
            return None
        return unavailable(state)

    def failed(self, model: JudgeModel, error: str) -> None:
        """An attempt that failed as an unavailable provider does."""
        key, now = circuit_key(model), self.clock()
        state = self.store.get(key) or CircuitState()
        if state.first_failure_at is None or now - state.first_failure_at > self.policy.window_s:
            state = replace(state, failures=0, first_failure_at=now)
        state = replace(state, failures=state.failures + 1, last_error=error)
        if state.opened_at is not None or state.failures >= self.policy.failures:
            state = replace(state, opened_at=now)  # opened, or a failed probe: a new cool-down
        self.store.put(key, state, self._ttl())
        self.store.release(key)

    def succeeded(self, model: JudgeModel) -> None:
        """An attempt the provider answered: the circuit closes."""
        key = circuit_key(model)
        state = self.store.get(key)
        if state is not None and (state.failures or state.opened_at is not None):
            self.store.put(key, CircuitState(), self._ttl())
            self.store.release(key)

    def view(self, model: JudgeModel) -> CircuitView:
        """The circuit of `model` now."""
        return self.view_of(self.store.get(circuit_key(model)))

    def view_of(self, state: CircuitState | None) -> CircuitView:
        """A circuit's record (None: none kept, closed) as it stands now."""
        state = state or CircuitState()
        if state.opened_at is None:
            return CircuitView("closed", state.failures, None, None, state.last_error)
        retry_at = state.opened_at + self.policy.cooldown_s
        status: Status = "half-open" if self.clock() >= retry_at else "open"
        return CircuitView(status, state.failures, state.opened_at, retry_at, state.last_error)

    def _ttl(self) -> float:
        # A record outlives its window and cool-down; a circuit nobody calls is forgotten.
        return self.policy.window_s + self.policy.cooldown_s + 3600.0


def unavailable(state: CircuitState) -> str:
    """The error of an attempt refused by an open circuit."""
    since = _iso(state.opened_at)
    return f"provider unavailable ({state.failures} failures in a row, the last: {state.last_error}; since {since})"


def _iso(instant: float | None) -> str | None:
    if instant is None:
        return None
    return datetime.fromtimestamp(instant, UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
