"""Keyset (cursor) paging: the one cursor codec, and the pages' paginator; and the bounded
counts the pages show.

A page costs one query whatever its position: the cursor is the position of the row at
the page's edge (its time or status, then its id), and the next page is the rows strictly
past it in that order, which an index answers directly. The API's `KeysetPagination`, the
run results' list and the pages all write and read cursors with `encode` and `decode`; on
a page, a cursor that cannot be read starts from the newest rows instead of failing.
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.conf import settings
from django.db.models import Model, Q, QuerySet
from django.http import HttpRequest
from django.utils.dateparse import parse_datetime

from kindgi_console.filters import MAX_ID

PAGE_SIZES = (25, 50, 100, 200)
DEFAULT_PAGE_SIZE = 50


@dataclass(frozen=True, eq=False)
class CappedCount:
    """A count a page shows, read no further than KINDGI_PAGE_COUNT_CAP rows: past it the
    page says "10,000+", so that the page costs the same at any table size (an exact count
    reads every matching row). `more`: there are more than `value`."""

    value: int
    more: bool = False

    def __str__(self) -> str:
        return f"{self.value:,}+" if self.more else str(self.value)

    def __int__(self) -> int:
        return self.value

    def __eq__(self, other: object) -> bool:
        """Equal to the same count, and to an int when it is exact."""
        if isinstance(other, CappedCount):
            return (self.value, self.more) == (other.value, other.more)
        if isinstance(other, int):
            return not self.more and self.value == other
        return NotImplemented

    def __hash__(self) -> int:
        return hash((self.value, self.more))

    def __float__(self) -> float:  # the templates' `pluralize`
        return float(self.value) + (1.0 if self.more else 0.0)

    def __bool__(self) -> bool:
        return self.value > 0

    def __add__(self, other: CappedCount | int) -> CappedCount:
        if isinstance(other, CappedCount):
            return CappedCount(self.value + other.value, self.more or other.more)
        return CappedCount(self.value + other, self.more)

    __radd__ = __add__


def bounded_count(rows: QuerySet[Any], cap: int | None = None) -> CappedCount:
    """How many rows `rows` has, counting no further than `cap` (KINDGI_PAGE_COUNT_CAP)."""
    cap = int(settings.KINDGI_PAGE_COUNT_CAP) if cap is None else cap
    counted = rows.order_by()[: cap + 1].count()
    return CappedCount(cap, True) if counted > cap else CappedCount(counted)


@dataclass
class Page:
    rows: list[Any]
    size: int
    next_url: str | None
    previous_url: str | None


def page_size(request: HttpRequest) -> int:
    raw = request.GET.get("size", "")
    return int(raw) if raw.isdigit() and int(raw) in PAGE_SIZES else DEFAULT_PAGE_SIZE


class BadCursor(ValueError):
    """A cursor that is not one `encode` wrote."""


def encode(row: Model, field: str) -> str:
    """The cursor of `row`'s position: its `field` (a time or a text), then its id."""
    value = getattr(row, field)
    return encode_text(value.isoformat() if isinstance(value, datetime) else str(value), row.pk)


def encode_text(text: str, pk: int) -> str:
    """The cursor of the position (text, id)."""
    return base64.urlsafe_b64encode(f"{text}|{pk}".encode()).decode()


def decode_key(text: str) -> int:
    """A row key a cursor holds, as a database can compare it; ValueError for any other
    number (negative, beyond a 64-bit column, or not a number)."""
    key = int(text)
    if not 0 <= key <= MAX_ID:
        raise ValueError(text)
    return key


def decode_text(raw: str) -> tuple[str, int]:
    """The (text, id) a cursor holds; BadCursor for one that `encode` did not write."""
    try:
        text, pk_text = base64.urlsafe_b64decode(raw.encode()).decode().split("|")
        return text, decode_key(pk_text)
    except (ValueError, binascii.Error, UnicodeDecodeError):
        raise BadCursor(raw) from None


def decode_time(raw: str) -> tuple[datetime, int]:
    """The (time, id) a cursor holds; BadCursor for one that `encode` did not write."""
    text, pk = decode_text(raw)
    try:
        moment = parse_datetime(text)
    except ValueError:
        moment = None
    if moment is None:
        raise BadCursor(raw)
    return moment, pk


def decode(raw: str | None) -> tuple[datetime, int] | None:
    """A page's (time, id) cursor, or None for none or one that cannot be read."""
    if not raw:
        return None
    try:
        return decode_time(raw)
    except BadCursor:
        return None


def past(field: str, position: tuple[Any, int], direction: str = "lt") -> Q:
    """The rows strictly past `position` in the order (`field`, id): `lt` older, `gt` newer.
    The bound on `field` alone lets the database start an index's range there: the OR of the
    two cases alone is read as a filter over every row before it."""
    value, pk = position
    return Q(**{f"{field}__{direction}e": value}) & (
        Q(**{f"{field}__{direction}": value}) | Q(**{f"pk__{direction}": pk})
    )


def keyset_page(request: HttpRequest, queryset: QuerySet[Any], field: str) -> Page:
    """The page of `queryset` (newest first by `field`, then id) that the request asks for.

    `?after=<cursor>` gives the rows older than the cursor, `?before=<cursor>` the rows
    newer than it; `?size=` the page size (one of PAGE_SIZES).
    """
    size = page_size(request)
    after, before = decode(request.GET.get("after")), decode(request.GET.get("before"))
    if before is not None:
        newer = queryset.filter(past(field, before, "gt"))
        rows = list(newer.order_by(field, "pk")[: size + 1])
        has_more_newer = len(rows) > size
        rows = rows[:size][::-1]
        return Page(
            rows,
            size,
            next_url=_link(request, "after", encode(rows[-1], field)) if rows else None,
            previous_url=_link(request, "before", encode(rows[0], field)) if has_more_newer else None,
        )
    if after is not None:
        queryset = queryset.filter(past(field, after))
    rows = list(queryset.order_by(f"-{field}", "-pk")[: size + 1])
    has_more = len(rows) > size
    rows = rows[:size]
    return Page(
        rows,
        size,
        next_url=_link(request, "after", encode(rows[-1], field)) if has_more else None,
        previous_url=_link(request, "before", encode(rows[0], field)) if after and rows else None,
    )


def _link(request: HttpRequest, name: str, cursor: str) -> str:
    query = request.GET.copy()
    query.pop("after", None)
    query.pop("before", None)
    query[name] = cursor
    return f"{request.path}?{query.urlencode()}"
