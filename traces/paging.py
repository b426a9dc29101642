"""Keyset (cursor) pagination for the pages: newest first on (time, id), both directions.

A page costs one query whatever its position: the cursor is the (time, id) of the row
at the page's edge, and the next page is the rows strictly before it in that order,
which an index on (tenant, time desc, id desc) answers directly. A cursor that cannot be
read starts from the newest rows instead of failing.
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db.models import Model, Q, QuerySet
from django.http import HttpRequest
from django.utils.dateparse import parse_datetime

PAGE_SIZES = (25, 50, 100, 200)
DEFAULT_PAGE_SIZE = 50


@dataclass
class Page:
    rows: list[Any]
    size: int
    next_url: str | None
    previous_url: str | None


def page_size(request: HttpRequest) -> int:
    raw = request.GET.get("size", "")
    return int(raw) if raw.isdigit() and int(raw) in PAGE_SIZES else DEFAULT_PAGE_SIZE


def encode(row: Model, field: str) -> str:
    text = f"{getattr(row, field).isoformat()}|{row.pk}"
    return base64.urlsafe_b64encode(text.encode()).decode()


def decode(raw: str | None) -> tuple[datetime, int] | None:
    if not raw:
        return None
    try:
        moment_text, pk_text = base64.urlsafe_b64decode(raw.encode()).decode().split("|")
        moment = parse_datetime(moment_text)
        return (moment, int(pk_text)) if moment is not None else None
    except (ValueError, binascii.Error, UnicodeDecodeError):
        return None


def keyset_page(request: HttpRequest, queryset: QuerySet[Any], field: str) -> Page:
    """The page of `queryset` (newest first by `field`, then id) that the request asks for.

    `?after=<cursor>` gives the rows older than the cursor, `?before=<cursor>` the rows
    newer than it; `?size=` the page size (one of PAGE_SIZES).
    """
    size = page_size(request)
    after, before = decode(request.GET.get("after")), decode(request.GET.get("before"))
    if before is not None:
        moment, pk = before
        newer = queryset.filter(Q(**{f"{field}__gt": moment}) | Q(**{field: moment, "pk__gt": pk}))
        rows = list(newer.order_by(field, "pk")[: size + 1])
        has_more_newer = len(rows) > size
        rows = rows[:size][::-1]
        return Page(
            rows, size,
            next_url=_link(request, "after", encode(rows[-1], field)) if rows else None,
            previous_url=_link(request, "before", encode(rows[0], field)) if has_more_newer else None,
        )
    if after is not None:
        moment, pk = after
        queryset = queryset.filter(Q(**{f"{field}__lt": moment}) | Q(**{field: moment, "pk__lt": pk}))
    rows = list(queryset.order_by(f"-{field}", "-pk")[: size + 1])
    has_more = len(rows) > size
    rows = rows[:size]
    return Page(
        rows, size,
        next_url=_link(request, "after", encode(rows[-1], field)) if has_more else None,
        previous_url=_link(request, "before", encode(rows[0], field)) if after and rows else None,
    )


def _link(request: HttpRequest, name: str, cursor: str) -> str:
    query = request.GET.copy()
    query.pop("after", None)
    query.pop("before", None)
    query[name] = cursor
    return f"{request.path}?{query.urlencode()}"
