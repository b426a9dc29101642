"""What a guardrail asks of the sandbox: its posture, limits, network policy and handler.

Read from the guardrail's wire document (`sandbox`, `limits`, `network`, `needsSpec`), with
the deployment's defaults filling the limits a sandboxed guardrail does not declare.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from guardrails.engine.types import Check, StrategyError

Level = Literal["none", "context-isolated", "strict"]
NetworkKind = Literal["none", "allowlist", "unrestricted"]
_LEVELS: tuple[Level, ...] = ("none", "context-isolated", "strict")
SANDBOXED_LEVELS: frozenset[str] = frozenset({"context-isolated", "strict"})


@dataclass(frozen=True, slots=True)
class SandboxDefaults:
    """The deployment's limits for sandboxed guardrails that declare none (settings).

    `wall_grace_ms` is added to a call's CPU limit to give its wall-clock bound: a handler
    that sleeps or blocks uses no CPU, and the pool kills it at that bound. `max_tasks`
    bounds the processes and threads of one sandbox; `max_idle` the warm workers kept in
    all (the least recently used is stopped beyond it).
    """

    mem_mb: int = 256
    cpu_ms: int = 1000
    pool_size: int = 2
    wall_grace_ms: int = 1000
    start_timeout_s: float = 10.0
    max_tasks: int = 16
    max_idle: int = 32


@dataclass(frozen=True, slots=True)
class NetworkPolicy:
    kind: NetworkKind = "unrestricted"
    hosts: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Posture:
    """How a sandboxed handler runs. Workers are pooled per posture and handler.

    Limits apply to both sandboxed levels (declared, else the defaults); the network policy
    is enforced whenever a sandboxed guardrail declares one, and a `strict` guardrail without
    one gets no network at all, the posture's safe reading.
    """

    level: Level
    mem_mb: int
    cpu_ms: int
    network: NetworkPolicy
    wall_grace_ms: int = 1000

    @property
    def wall_ms(self) -> int:
        """The wall-clock bound of one call: the CPU limit plus the grace."""
        return self.cpu_ms + self.wall_grace_ms


@dataclass(frozen=True, slots=True)
class HandlerRef:
    """Where a worker finds a check's evaluate function.

    `module` is a dotted module name, or an absolute path to a `.py` file for a check loaded
    from a `filesystem` code artifact.
    """

    module: str
    function: str

    @classmethod
    def for_check(cls, check: Check) -> HandlerRef:
        if not check.module or not check.function:
            raise StrategyError(
                f"check {check.id!r} has no importable evaluate function, so it cannot run in the sandbox"
            )
        if "<" in check.function:
            raise StrategyError(
                f"check {check.id!r}: evaluate function {check.function!r} is not a module-level "
                "function, so a sandbox worker cannot import it"
            )
        return cls(check.module, check.function)

    @property
    def is_path(self) -> bool:
        return os.path.isabs(self.module)


def sandbox_level(document: Mapping[str, Any]) -> Level:
    level = str(document.get("sandbox") or "none")
    for known in _LEVELS:
        if level == known:
            return known
    raise StrategyError(f"/sandbox: unknown sandbox posture {level!r}")


def posture_for(document: Mapping[str, Any], defaults: SandboxDefaults) -> Posture:
    """The posture a sandboxed guardrail document asks for, defaults filled in."""
    level = sandbox_level(document)
    limits = document.get("limits") or {}
    network = _network_policy(document.get("network"), level)
    return Posture(
        level=level,
        mem_mb=int(limits.get("memMB", defaults.mem_mb)),
        cpu_ms=int(limits.get("cpuMs", defaults.cpu_ms)),
        network=network,
        wall_grace_ms=defaults.wall_grace_ms,
    )


def _network_policy(raw: object, level: str) -> NetworkPolicy:
    if raw is None:
        return NetworkPolicy("none" if level == "strict" else "unrestricted")
    if not isinstance(raw, Mapping) or raw.get("kind") not in ("none", "allowlist", "unrestricted"):
        raise StrategyError(f"/network: unknown network policy {raw!r}")
    hosts = tuple(str(host).strip().lower() for host in raw.get("hosts") or ())
    return NetworkPolicy(raw["kind"], hosts)


def declared_names(document: Mapping[str, Any]) -> tuple[str, ...]:
    """Environment variables and secrets the guardrail's needsSpec declares, in order."""
    needs = document.get("needsSpec") or {}
    names = [*(needs.get("env") or {}), *(needs.get("secrets") or {})]
    return tuple(dict.fromkeys(str(name) for name in names))
