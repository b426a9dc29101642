"""A well-formed pack: a module-level CHECKS list and a version."""

from __future__ import annotations

from guardrails.engine.registry import define_check
from guardrails.engine.types import PASSED, CheckOutcome, Config, Trace, failed

__version__ = "1.2.0"


def says_word(config: Config, trace: Trace) -> CheckOutcome:
    """Pass when the output contains the configured word."""
    word = config["word"]
    return PASSED if word in (trace.get("output") or "") else failed(f"no {word!r} in output")


CHECKS = [
    define_check(
        "says-word",
        "zero-llm",
        says_word,
        config_schema={
            "type": "object",
            "properties": {"word": {"type": "string", "minLength": 1}},
            "required": ["word"],
            "additionalProperties": False,
        },
        description="The output contains a word.",
    )
]
