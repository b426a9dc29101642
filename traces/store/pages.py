"""What the pages of several contexts share: the guardrails and review queues a person may
filter by, the violation pages' filter, and the stacked bar charts of the violation and
ledger pages."""

from __future__ import annotations

from collections import defaultdict
from datetime import date, timedelta
from decimal import Decimal
from typing import Any

from django.db.models import TextField
from django.db.models.functions import Cast
from django.http import HttpRequest
from django.utils import timezone

from guardrails.models import Guardrail, GuardrailRevision
from kindgi_console.filters import PageFilterForm
from kindgi_console.tenancy.scoping import Caller
from traces.models import escalation_queue
from traces.store.filters import ViolationPageFilter

#: How far back charts look when the filter names no start.
CHART_DAYS = 30


def guardrail_choices(request: HttpRequest) -> list[tuple[str, str]]:
    """(id, label) of the guardrails the person may read (console-wide and their tenants'
    own, deleted ones too: history names them), for the filters."""
    visible = Guardrail.objects.for_caller(Caller(user=request.user))
    return [(gid, gid) for gid in visible.order_by("guardrail_id").values_list("guardrail_id", flat=True)]


def queue_choices(request: HttpRequest) -> list[tuple[str, str]]:
    """(name, name) of the review queues that the revisions of the guardrails the person may
    read name (deleted guardrails' too): every queue a violation they see can be in, since
    a violation's queue is its revision's (`escalation_queue`). Only the documents that
    mention `escalate` are read and parsed."""
    visible = Guardrail.objects.for_caller(Caller(user=request.user))
    documents = (
        GuardrailRevision.objects.filter(guardrail__in=visible)
        .annotate(text=Cast("document", TextField()))
        .filter(text__contains='"escalate"')
        .values_list("document", flat=True)
    )
    names = {escalation_queue(document) for document in documents if isinstance(document, dict)}
    return [(name, name) for name in sorted(name for name in names if name)]


def violation_filter(request: HttpRequest, data: Any, **kwargs: Any) -> ViolationPageFilter:
    """The violation pages' filter of `data` (the list, its chart, a bulk review, the review
    queue), with the person's guardrails and queues to choose from and `assignee=me` theirs."""
    return ViolationPageFilter(
        data,
        guardrails=guardrail_choices(request),
        queues=queue_choices(request),
        caller=Caller(user=request.user),
        **kwargs,
    )


def chart_days(form: PageFilterForm) -> tuple[date, date]:
    today = timezone.localdate()
    last = form.value("until") or today
    first = form.value("since") or (last - timedelta(days=CHART_DAYS - 1))
    return first, max(first, last)


def chart_data(
    rows: list[tuple[date, str, Any]],
    first: date,
    last: date,
    *,
    order: list[str] | None = None,
    y_format: str,
    title: str,
    top: int = 8,
) -> dict[str, Any]:
    """A stacked bar chart of (day, series, value) rows, one bar per day from first to last.

    Beyond the `top` largest series, the rest are summed as "other".
    """
    days = [first + timedelta(days=n) for n in range((last - first).days + 1)]
    index = {day: n for n, day in enumerate(days)}
    totals: dict[str, Any] = defaultdict(int)
    for _, name, value in rows:
        totals[name or "none"] += value
    if order is not None:
        names = [name or "none" for name in order if (name or "none") in totals]
    else:
        names = sorted(totals, key=lambda name: -totals[name])
    kept = set(names[:top])
    data: dict[str, list[Any]] = {name: [0] * len(days) for name in names[:top]}
    if len(names) > top:
        data["other"] = [0] * len(days)
    for day, name, value in rows:
        if day in index:
            key = name or "none"
            data[key if key in kept else "other"][index[day]] += value
    return {
        "type": "bar",
        "stacked": True,
        "yFormat": y_format,
        "title": title,
        "labels": [day.isoformat() for day in days],
        "datasets": [
            {"label": name, "data": [float(v) if isinstance(v, Decimal) else v for v in values]}
            for name, values in data.items()
        ],
    }
