"""Keyset pages for the console's list pages: (created_at, id), newest first.

Page 1,000 costs what page 1 costs; the cursor is the last row shown.
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass
from typing import Any

from django.db.models import Q, QuerySet
from django.http import HttpRequest
from django.utils.dateparse import parse_datetime

PAGE_SIZE = 25


@dataclass
class Page:
    rows: list[Any]
    next_url: str
    previous_url: str


def keyset_page(queryset: QuerySet[Any], request: HttpRequest, size: int = PAGE_SIZE) -> Page:
    """The page after `?cursor=` (the first page without one); an unreadable cursor is page 1."""
    cursor = _decode(request.GET.get("cursor", ""))
    if cursor is not None:
        moment, pk = cursor
        queryset = queryset.filter(Q(created_at__lt=moment) | Q(created_at=moment, pk__lt=pk))
    rows = list(queryset.order_by("-created_at", "-pk")[: size + 1])
    query = request.GET.copy()
    next_url = ""
    if len(rows) > size:
        rows = rows[:size]
        query["cursor"] = _encode(rows[-1])
        next_url = f"{request.path}?{query.urlencode()}"
    previous_url = ""
    if cursor is not None:
        query.pop("cursor", None)
        previous_url = f"{request.path}?{query.urlencode()}" if query else request.path
    return Page(rows, next_url, previous_url)


def _encode(row: Any) -> str:
    return base64.urlsafe_b64encode(f"{row.created_at.isoformat()}|{row.pk}".encode()).decode()


def _decode(raw: str) -> tuple[Any, int] | None:
    if not raw:
        return None
    try:
        moment_text, pk_text = base64.urlsafe_b64decode(raw.encode()).decode().split("|")
        moment = parse_datetime(moment_text)
        return (moment, int(pk_text)) if moment is not None else None
    except (ValueError, binascii.Error, UnicodeDecodeError):
        return None
