"""A pack module that spins the CPU while it is imported, before any check is called."""

from __future__ import annotations

from typing import Any

from guardrails.engine.types import PASSED, CheckOutcome

while True:
    pass


def never_called(config: Any, trace: Any) -> CheckOutcome:
    return PASSED
