"""The review queue: "Review next" walks the open violations of the list's filter one at a
time, the violation beside its trace's timeline, with keyboard shortcuts.

The queue is the violation list's own filter (`ViolationPageFilter`) narrowed to `open`, in
the list's order (newest first). `?at=<pk>` shows one violation, `?after=<pk>` the first open
one after it (which is where a review sends the reviewer next), wrapping to the start.
A review posts to the usual review endpoint, whose `next` brings the reviewer back here.
The page's own bar narrows the walk to a review queue (an escalate guardrail's
`escalateTo`) and to who claimed the violations (`assignee`: me, nobody); each violation
shows who holds it, and `c` claims or releases it (`traces.review.claims`), staying on it.
"""

from __future__ import annotations

from typing import Any

from django.db.models import Q, QuerySet
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.views import View

from kindgi_console.paging import bounded_count, past
from kindgi_console.tenancy.views import TenantScopedMixin
from traces.models import Violation
from traces.review import workflow
from traces.review.views import claim_context
from traces.store import timeline
from traces.store.pages import violation_filter

#: j/k move, a/r/f review, n writes a note: shown on the page as well as bound.
SHORTCUTS = [
    ("j", "next violation"),
    ("k", "previous violation"),
    ("a", "acknowledge"),
    ("r", "resolve"),
    ("f", "false positive"),
    ("n", "write a note"),
    ("c", "claim or release"),
]
#: The filters the page's own bar sets; the others come from the list and are kept as they are.
BAR_FILTERS = ("queue", "assignee")
REVIEW_KEYS = {"acknowledged": "a", "resolved": "r", "false-positive": "f"}


def newer(violation: Violation) -> Q:
    """Violations before `violation` in the list's order (newest first)."""
    return past("created_at", (violation.created_at, violation.pk), "gt")


def older(violation: Violation) -> Q:
    return past("created_at", (violation.created_at, violation.pk), "lt")


class ReviewQueueView(TenantScopedMixin, View):
    """One open violation of the filter at a time, with what is left and where to go next."""

    model = Violation
    template_name = "traces/review_queue.html"

    def get(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        data = request.GET.copy()
        data.pop("state", None)  # the queue is the open ones; `matching` counts every state
        filterset = violation_filter(request, data)
        form = filterset.form
        matching = filterset.apply(self.get_queryset().order_by("-created_at", "-pk"))
        queue = matching.filter(state=Violation.State.OPEN)
        current = self.current(queue, request)
        filter_query = self.filter_query(request)
        context: dict[str, Any] = {
            "form": form,
            "violation": current,
            "nav_active": "violations",
            "matching": bounded_count(matching),
            "left": bounded_count(queue),
            "shortcuts": SHORTCUTS,
            "filter_query": filter_query,
            "list_url": f"{reverse('violation-list')}?{filter_query}",
            "bar_fields": [form[name] for name in BAR_FILTERS],
            "kept_filters": [(name, str(value)) for name, value in request.GET.items() if self.kept(name, str(value))],
        }
        if current is not None:
            context.update(self.around(queue, current, filter_query))
        return render(request, self.template_name, context)

    def current(self, queue: QuerySet[Violation], request: HttpRequest) -> Violation | None:
        """`at` exactly (404 if not in this tenant), else the first after `after`, else the first."""
        rows = queue.select_related("guardrail", "revision", "trace", "result")
        at, after = request.GET.get("at", ""), request.GET.get("after", "")
        if at.isdigit():
            scoped: QuerySet[Violation] = self.get_queryset()
            found = scoped.select_related("guardrail", "revision", "trace", "result")
            violation = found.filter(pk=int(at)).first()
            if violation is None:
                raise Http404("no such violation")
            return violation
        if after.isdigit():
            anchor = self.get_queryset().filter(pk=int(after)).first()
            if anchor is not None:
                following = rows.filter(older(anchor)).first()
                if following is not None:
                    return following
        return rows.first()

    def around(self, queue: QuerySet[Violation], current: Violation, filter_query: str) -> dict[str, Any]:
        """Position, neighbours, the trace's timeline and the review buttons of `current`."""
        base = f"{reverse('review-queue')}?{filter_query}&" if filter_query else f"{reverse('review-queue')}?"
        following = queue.filter(older(current)).values_list("pk", flat=True).first()
        previous = queue.filter(newer(current)).order_by("created_at", "pk").values_list("pk", flat=True).first()
        document = current.trace.document if isinstance(current.trace.document, dict) else {}
        return {
            "position": bounded_count(queue.filter(newer(current))) + 1,
            "next_url": f"{base}at={following}" if following else "",
            "previous_url": f"{base}at={previous}" if previous else "",
            "after_url": f"{base}after={current.pk}",
            "at_url": f"{base}at={current.pk}",
            "claim": claim_context(current, self.caller),
            "steps": timeline.steps(document, withheld=current.trace.withheld),
            "details": timeline.pretty(current.result.details) if current.result.details else "",
            "review_actions": [
                (state, label, REVIEW_KEYS.get(state, "")) for state, label in workflow.next_states(current.state)
            ],
        }

    @staticmethod
    def kept(name: str, value: str) -> bool:
        """Whether the queue bar keeps a parameter as a hidden field: a filter of the list's."""
        return bool(value) and name not in (*BAR_FILTERS, "at", "after", "before", "size", "state")

    @staticmethod
    def filter_query(request: HttpRequest) -> str:
        query = request.GET.copy()
        for name in ("at", "after", "before", "size", "state"):
            query.pop(name, None)
        return query.urlencode()
