"""An invalid pack for a deployment without a `quantum` strategy."""

from __future__ import annotations

from guardrails.engine.registry import define_check
from tests.packs.greetings import says_word

CHECKS = [define_check("entangled", "quantum", says_word, config_schema={"type": "object"})]
