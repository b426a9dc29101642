"""The judge's circuit breakers in the console's cache, shared by every process.

The engine's breaker (guardrails/engine/judge/circuit.py) keeps its state in a store the
caller gives it; here that store is Django's cache (Redis in a deployment, a database table
on the embedded default), so that a provider found down by a run's worker also fails the
runtime path's calls at once, and the judge models page shows what every process sees. The
probe of a half-open circuit is taken with `cache.add`, which is atomic in both backends.

The cache is read once per judge attempt and written only while a provider fails. A cache
that cannot be reached must not fail an evaluation: the breaker then sees a closed circuit.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from django.conf import settings
from django.core.cache import cache

from guardrails.engine.judge import CircuitBreaker, CircuitPolicy, CircuitView, JudgeModel, circuit_key
from guardrails.engine.judge.circuit import CircuitState

logger = logging.getLogger(__name__)

_STATE = "judge-circuit:{}"
_PROBE = "judge-circuit-probe:{}"


class CacheCircuitStore:
    """CircuitStore over Django's default cache."""

    def get(self, key: str) -> CircuitState | None:
        try:
            data = cache.get(_STATE.format(key))
        except Exception as error:  # any backend's failure: the circuit reads closed
            logger.warning("judge circuit state unreadable: %s", error)
            return None
        return _state(data)

    def put(self, key: str, state: CircuitState, ttl_s: float) -> None:
        try:
            cache.set(_STATE.format(key), state.to_dict(), timeout=round(ttl_s))
        except Exception as error:
            logger.warning("judge circuit state not saved: %s", error)

    def claim(self, key: str, ttl_s: float) -> bool:
        try:
            return bool(cache.add(_PROBE.format(key), 1, timeout=max(1, round(ttl_s))))
        except Exception as error:  # no probe claimed: the circuit stays open
            logger.warning("judge circuit probe not claimed: %s", error)
            return False

    def release(self, key: str) -> None:
        try:
            cache.delete(_PROBE.format(key))
        except Exception as error:
            logger.warning("judge circuit probe not released: %s", error)


def circuit_policy() -> CircuitPolicy:
    """The breaker's thresholds from the settings (KINDGI_JUDGE_CIRCUIT_*)."""
    return CircuitPolicy(
        failures=settings.KINDGI_JUDGE_CIRCUIT_FAILURES,
        window_s=float(settings.KINDGI_JUDGE_CIRCUIT_WINDOW_S),
        cooldown_s=float(settings.KINDGI_JUDGE_CIRCUIT_COOLDOWN_S),
    )


def judge_circuit() -> CircuitBreaker:
    """The console's circuit breaker: every judge call of every evaluation goes through it."""
    return CircuitBreaker(CacheCircuitStore(), circuit_policy())


def circuits_of(models: Sequence[JudgeModel]) -> list[CircuitView]:
    """The circuits of registered models, in their order, as the judge models page and API
    show them: one read of the cache for them all."""
    keys = [_STATE.format(circuit_key(model)) for model in models]
    try:
        found = cache.get_many(keys) if keys else {}
    except Exception as error:  # unreadable: shown closed, as the breaker then sees them
        logger.warning("judge circuit states unreadable: %s", error)
        found = {}
    breaker = judge_circuit()
    return [breaker.view_of(_state(found.get(key))) for key in keys]


def _state(data: object) -> CircuitState | None:
    return CircuitState.from_dict(data) if isinstance(data, dict) else None
