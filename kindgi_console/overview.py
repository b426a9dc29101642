"""The overview page: the current tenant at a glance, in a few queries whose cost does not grow
with the tables (counts stop at KINDGI_PAGE_COUNT_CAP)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.contrib.auth.mixins import LoginRequiredMixin
from django.utils import timezone
from django.views.generic import TemplateView

from guardrails.models import Guardrail
from kindgi_console.paging import CappedCount, bounded_count
from kindgi_console.tenancy.scoping import current_rows, current_tenant
from traces.models import Evaluation, RunTrace, Violation

SEVERITY_ORDER = ["critical", "error", "warn", "info"]
#: The review queues the overview lists (each a few index probes), and the severities it reads.
MAX_QUEUES = 50
MAX_SEVERITIES = 20


class OverviewView(LoginRequiredMixin, TemplateView):
    """Open violations by severity and by review queue, the last day's traces, recent
    violations and runs."""

    template_name = "overview.html"

    def enabled_guardrails(self) -> int:
        """The guardrails enforced on the current tenant: console-wide and its own."""
        tenant = current_tenant(self.request)
        return Guardrail.objects.enabled().applying_to(tenant.pk if tenant else None).count()

    def rows(self, model: Any) -> Any:
        return current_rows(self.request, model.objects)

    @staticmethod
    def queues(open_violations: Any) -> tuple[list[dict[str, Any]], bool]:
        """Each review queue with open violations: how many, and how many nobody claimed,
        each counted up to the cap. The names are read one index probe at a time (the next
        name past the last), so that the card costs the same however many violations wait;
        and whether there are more queues than MAX_QUEUES (the card says so)."""
        queued = open_violations.filter(queue__isnull=False).order_by("queue")
        found: list[dict[str, Any]] = []
        name = queued.values_list("queue", flat=True).first()
        while name is not None and len(found) < MAX_QUEUES:
            in_queue = open_violations.filter(queue=name)
            unclaimed = in_queue.filter(assignee__isnull=True)  # `violation_queue_unclaimed`
            found.append({"name": name, "count": bounded_count(in_queue), "unclaimed": bounded_count(unclaimed)})
            name = queued.filter(queue__gt=name).values_list("queue", flat=True).first()
        return found, name is not None

    @staticmethod
    def by_severity(open_violations: Any) -> tuple[list[dict[str, Any]], CappedCount]:
        """The open violations of each of the contract's severities, and of none or another
        (`unrated`), each counted up to the cap (`violation_open_severity`). The other names
        are found one index probe at a time (the next name past the last), at most
        MAX_SEVERITIES of them: past that, `unrated` is "N+"."""
        named = {name: bounded_count(open_violations.filter(severity=name)) for name in SEVERITY_ORDER}
        rated = open_violations.order_by("severity").values_list("severity", flat=True)
        unrated, others = CappedCount(0), 0
        name = rated.first()
        while name is not None and others < MAX_SEVERITIES:
            if name not in named:
                unrated, others = unrated + bounded_count(open_violations.filter(severity=name)), others + 1
            name = rated.filter(severity__gt=name).first()
        severities = [{"name": name, "count": named[name]} for name in SEVERITY_ORDER]
        return severities, CappedCount(unrated.value, unrated.more or name is not None)

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        since = timezone.now() - timedelta(hours=24)
        open_violations = self.rows(Violation).filter(state=Violation.State.OPEN)
        severities, unrated = self.by_severity(open_violations)
        queues, more_queues = self.queues(open_violations)
        return {
            **super().get_context_data(**kwargs),
            "severities": severities,
            "open_total": sum((item["count"] for item in severities), unrated),
            "unrated": unrated,
            "queues": queues,
            "more_queues": more_queues,
            "traces_24h": bounded_count(self.rows(RunTrace).filter(received_at__gte=since)),
            "guardrails_enabled": self.enabled_guardrails(),
            "recent_violations": list(
                self.rows(Violation).select_related("guardrail", "trace").order_by("-created_at", "-pk")[:8]
            ),
            "recent_evaluations": list(self.rows(Evaluation).order_by("-created_at", "-pk")[:5]),
        }
