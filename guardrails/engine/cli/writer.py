"""What the CI commands write their reports and messages to (a text stream, or a test's)."""

from typing import Any, Protocol


class Writer(Protocol):
    def write(self, text: str, /) -> Any: ...
