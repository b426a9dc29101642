"""Keeping secrets out of what is stored and shown.

A provider may echo the API key it was sent in its error text ("Incorrect API key provided:
sk-..."), and a check may put a secret it was given into an exception. Every such text goes
through `redact` with the secrets the caller knows before it is kept anywhere.
"""

from __future__ import annotations

from collections.abc import Iterable

REDACTED = "[redacted]"
#: Shorter values are not treated as secrets: replacing them would garble ordinary text.
MIN_SECRET_LENGTH = 6


def redact(text: str, secrets: Iterable[str | None]) -> str:
    """`text` with every occurrence of each secret replaced by REDACTED, longest first (so
    that a secret containing another is replaced whole)."""
    wanted = sorted({s for s in secrets if s and len(s) >= MIN_SECRET_LENGTH}, key=len, reverse=True)
    for secret in wanted:
        if secret in text:
            text = text.replace(secret, REDACTED)
    return text
