"""What the code generated from a schema (guardrails/engine/schema_code.py) calls: the
exact tests that are not one expression (date-times, JSON's own types, unique strings),
and `Unsure`, raised where the code cannot decide, which makes a document "not proven".

Both the code generated at run time and schema_proofs.py, written ahead, import these
names; the generator itself lives in schema_code.py.
"""

from __future__ import annotations

import math
import re
from datetime import datetime
from functools import cache
from typing import Any

__all__ = [
    "BIG",
    "END",
    "LOW",
    "NO_END",
    "Unsure",
    "date_time",
    "date_times",
    "plain",
    "regex",
    "type_miss",
    "unique_strings",
]

# RFC 3339 date-times in the layout proven here (upper-case T and Z, no leap second), on a
# day every year has: the 29th of February is left to date_time.
_MONTH_DAY = r"(?:(?:0[1-9]|1[0-2])-(?:0[1-9]|1[0-9]|2[0-8])|(?:0[13-9]|1[0-2])-(?:29|30)|(?:0[13578]|1[02])-31)"
_ONE_DATE_TIME = (
    rf"(?!0000)[0-9]{{4}}-{_MONTH_DAY}T(?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9]"
    r"(?:\.[0-9]+)?(?:Z|[+-](?:[01][0-9]|2[0-3]):[0-5][0-9])"
)
#: YYYY-MM-DDTHH:MM:SSZ with every digit a 0, and that layout 0 to 63 times, one a line.
_LAYOUT = b"0000-00-00T00:00:00Z"
_LAYOUTS = [b"\n".join([_LAYOUT] * count) for count in range(64)]
#: Every digit made 0 (bytes.translate: a table lookup a byte, where str.translate looks up
#: each character in a dict).
_ZEROS = bytes.maketrans(b"123456789", b"000000000")
_from_iso = datetime.fromisoformat
_LEAP_DAY = _ONE_DATE_TIME.replace(_MONTH_DAY, "02-29").replace("[0-9]{4}", "([0-9]{4})", 1)
BIG = 1 << 63
# (names, not `-BIG` and `v - v == 0.0` written in the code: each would make an object a test)
LOW = -BIG
END, NO_END = math.inf, -math.inf


@cache
def regex(pattern: str) -> re.Pattern[str]:
    """A regular expression compiled when first needed (re compiles slowly: not at start-up)."""
    return re.compile(pattern)


class Unsure(Exception):
    """The document holds something the generated code cannot decide exactly."""


def date_time(text: str) -> bool:
    """True for a date-time in the layout proven here, on a day the calendar has; any
    other string raises Unsure (jsonschema_rs decides what RFC 3339 allows beyond it)."""
    if regex(_ONE_DATE_TIME).fullmatch(text) is not None:
        return True
    leap = regex(_LEAP_DAY).fullmatch(text)
    if leap is not None:
        year = int(leap.group(1))
        if year % 4 == 0 and (year % 100 != 0 or year % 400 == 0):
            return True
    raise Unsure


def date_times(texts: list[str]) -> bool:
    """date_time of each date-time; the common layout tested for all at once (each digit made
    0, one a line: none holds a newline), datetime then checking ranges and calendar."""
    joined = "\n".join(texts).encode("utf-8", "replace").translate(_ZEROS)
    layouts = _LAYOUTS[len(texts)] if len(texts) < len(_LAYOUTS) else b"\n".join([_LAYOUT] * len(texts))
    if joined == layouts:
        try:
            return all(map(_from_iso, texts))  # (a datetime is true: this raises or says True)
        except ValueError:
            pass
    return all(date_time(text) for text in texts)


def plain(value: Any) -> None:
    """Raise Unsure unless `value` is made of JSON's own types only (as parsers build it)."""
    stack: list[Any] = [value]
    while stack:
        item = stack.pop()
        kind = type(item)
        if kind is str or kind is bool or item is None:
            continue
        if kind is int:
            if not -BIG < item < BIG:
                raise Unsure
        elif kind is float:
            if not math.isfinite(item):
                raise Unsure
        elif kind is dict:
            for key in item:
                if type(key) is not str:
                    raise Unsure
            stack.extend(item.values())
        elif kind is list:
            stack.extend(item)
        else:
            raise Unsure


def type_miss(value: Any) -> bool:
    """After a failed type test: False when the value is certainly of another type, or Unsure."""
    kind = type(value)
    if kind is float:
        if not math.isfinite(value) or value.is_integer():
            raise Unsure  # integral floats are integers to some validators
        return False
    if kind is int and -BIG < value < BIG:
        return False
    if kind in (str, bool, dict, list) or value is None:
        return False
    raise Unsure


def unique_strings(items: list[Any]) -> bool:
    if not all(type(item) is str for item in items):
        raise Unsure
    return len(set(items)) == len(items)
