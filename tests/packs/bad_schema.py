"""An invalid pack: a config schema that does not compile."""

from __future__ import annotations

from guardrails.engine.registry import define_check
from guardrails.engine.types import PASSED, CheckOutcome, Config, Trace


def anything(config: Config, trace: Trace) -> CheckOutcome:
    return PASSED


CHECKS = [define_check("broken-schema", "zero-llm", anything, config_schema={"type": 12})]
