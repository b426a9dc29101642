"""`{{ amount|usd }}`: a dollar amount as a person reads it, to the cent, or to four places
below a cent (a judge call costs fractions of one). The ledger shows exact amounts instead."""

from __future__ import annotations

from decimal import ROUND_HALF_UP, Decimal, InvalidOperation

from django import template

register = template.Library()

CENT = Decimal("0.01")
BELOW_A_CENT = Decimal("0.0001")


@register.filter
def usd(amount: object) -> str:
    """`$0.51` for 0.5060064, `$0.0043` for 0.00427, `$0.00` for nothing, `—` for no amount."""
    if amount is None or amount == "":
        return "—"
    try:
        value = Decimal(str(amount))
    except (InvalidOperation, ValueError):
        return "—"
    if not value.is_finite():
        return "—"
    sign, size = ("-" if value < 0 else ""), abs(value)
    if size == 0 or size >= CENT:
        return f"{sign}${size.quantize(CENT, rounding=ROUND_HALF_UP):,}"
    shown = size.quantize(BELOW_A_CENT, rounding=ROUND_HALF_UP)
    return f"{sign}${shown}" if shown else f"{sign}<$0.0001"
