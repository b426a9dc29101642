"""The sandbox for check handlers: context isolation, limits and network policy.

`sandbox: none` (or none declared) runs a handler in the evaluating process; the two
sandboxed postures run it in a warm worker process of a `SandboxPool`. See worker.py for
what a worker enforces and how, and network.py for the allowlist.
"""

from guardrails.engine.sandbox.pool import SandboxError, SandboxPool
from guardrails.engine.sandbox.posture import (
    SANDBOXED_LEVELS,
    HandlerRef,
    NetworkPolicy,
    Posture,
    SandboxDefaults,
    declared_names,
    posture_for,
    sandbox_level,
)

__all__ = [
    "SANDBOXED_LEVELS",
    "HandlerRef",
    "NetworkPolicy",
    "Posture",
    "SandboxDefaults",
    "SandboxError",
    "SandboxPool",
    "declared_names",
    "posture_for",
    "sandbox_level",
]
