"""A pack that defines an id another pack (greetings) already defines."""

from __future__ import annotations

from guardrails.engine.registry import define_check
from tests.packs.greetings import says_word

CHECKS = [define_check("says-word", "zero-llm", says_word, config_schema={"type": "object"})]
