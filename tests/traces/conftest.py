"""Fixtures shared by the traces tests."""

from __future__ import annotations

from typing import Any

import pytest

from guardrails.services import Author, save_guardrail
from tests.conftest import make_guardrail


@pytest.fixture
def guardrails(db: Any) -> list[Any]:
    """Three console-wide guardrails: a halting one, a citation check that only logs, and one
    scoped to the billing flow."""
    author = Author(user=None, label="fixture")
    return [
        save_guardrail(make_guardrail(), author),
        save_guardrail(
            make_guardrail(
                "cite", check="must-cite", config={"min": 1}, action={"on-violation": "log-only"}, severity="warn"
            ),
            author,
        ),
        save_guardrail(make_guardrail("billing-only", scope={"flows": ["billing"]}), author),
    ]
