"""The sandbox for check handlers: an operating-system boundary, limits and network policy.

`sandbox: none` (or none declared) runs a handler in the evaluating process; the two
sandboxed postures run it in a warm worker of a `SandboxPool`, behind bubblewrap: see
boundary.py for the boundary, cgroup.py for the limits over a whole sandbox, process.py for
the protocol, network.py for the allowlist.
"""

from guardrails.engine.sandbox.boundary import host_postures
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
    "host_postures",
    "posture_for",
    "sandbox_level",
]
