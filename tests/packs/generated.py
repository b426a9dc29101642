"""A pack that builds its checks in a `checks()` function, without a version."""

from __future__ import annotations

from guardrails.engine.registry import define_check
from guardrails.engine.types import Check
from tests.packs import handlers

_OPEN = {"type": "object"}


def checks() -> list[Check]:
    names = ["says_hello", "allocates", "loops_forever", "connects", "reads_environment", "raises"]
    return [
        define_check(f"sandboxed-{name.replace('_', '-')}", "zero-llm", getattr(handlers, name), config_schema=_OPEN)
        for name in names
    ]
