"""Dollar amounts on the pages: to the cent, or four places below a cent; the ledger exact."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest
from django.test import Client

from kindgi_console.templatetags.money import usd


@pytest.mark.parametrize(
    ("amount", "shown"),
    [
        (0.5060064, "$0.51"),
        ("1234.5", "$1,234.50"),
        (Decimal("0.00427"), "$0.0043"),
        (0.00004, "<$0.0001"),
        (0, "$0.00"),
        (-0.125, "-$0.13"),
        (None, "—"),
        ("not a number", "—"),
        (float("nan"), "—"),
    ],
)
def test_an_amount_is_shown_to_the_cent_or_four_places_below_one(amount: Any, shown: str) -> None:
    assert usd(amount) == shown


@pytest.mark.django_db
def test_a_zero_llm_guardrail_page_says_nothing_of_judge_spend(client: Client, alice: Any, halt_guardrail: Any) -> None:
    client.force_login(alice)
    response = client.get(f"/guardrails/{halt_guardrail.guardrail_id}/")
    page = response.content.decode()
    assert response.status_code == 200 and "Never refund without a human" in page
    assert "Judge spend" not in page
