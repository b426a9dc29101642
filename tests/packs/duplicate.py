"""An invalid pack: two checks with one id."""

from __future__ import annotations

from guardrails.engine.registry import define_check
from tests.packs.greetings import says_word

_SCHEMA = {"type": "object"}

CHECKS = [
    define_check("twice", "zero-llm", says_word, config_schema=_SCHEMA),
    define_check("twice", "zero-llm", says_word, config_schema=_SCHEMA),
]
