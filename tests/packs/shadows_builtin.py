"""A pack that ships a check under a built-in's id: the built-in replaces it."""

from __future__ import annotations

from guardrails.engine.registry import define_check
from guardrails.engine.types import PASSED, CheckOutcome, Config, Trace


def cites_nothing(config: Config, trace: Trace) -> CheckOutcome:
    return PASSED


CHECKS = [
    define_check("must-cite", "zero-llm", cites_nothing, config_schema={"type": "object"}),
    define_check("cites-nothing", "zero-llm", cites_nothing, config_schema={"type": "object"}),
]
