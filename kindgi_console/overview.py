"""The overview page: the current tenant at a glance, in a fixed number of queries."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.contrib.auth.mixins import LoginRequiredMixin
from django.db.models import Count, Q
from django.utils import timezone
from django.views.generic import TemplateView

from guardrails.models import Guardrail
from kindgi_console.tenancy.scoping import current_rows, current_tenant
from traces.models import Evaluation, RunTrace, Violation

SEVERITY_ORDER = ["critical", "error", "warn", "info"]


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
    def queues(open_violations: Any) -> list[dict[str, Any]]:
        """Each review queue with open violations: how many, and how many nobody claimed
        (one aggregate over the queues' partial index)."""
        rows = (
            open_violations.filter(queue__isnull=False)
            .order_by("queue")
            .values("queue")
            .annotate(count=Count("pk"), unclaimed=Count("pk", filter=Q(assignee__isnull=True)))
        )
        return [{"name": row["queue"], "count": row["count"], "unclaimed": row["unclaimed"]} for row in rows]

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        since = timezone.now() - timedelta(hours=24)
        open_violations = self.rows(Violation).filter(state=Violation.State.OPEN)
        by_severity = dict(open_violations.order_by().values_list("severity").annotate(n=Count("pk")))
        severities = [{"name": name, "count": by_severity.pop(name, 0)} for name in SEVERITY_ORDER]
        unrated = sum(by_severity.values())
        return {
            **super().get_context_data(**kwargs),
            "severities": severities,
            "open_total": sum(item["count"] for item in severities) + unrated,
            "unrated": unrated,
            "queues": self.queues(open_violations),
            "traces_24h": self.rows(RunTrace).filter(received_at__gte=since).count(),
            "guardrails_enabled": self.enabled_guardrails(),
            "recent_violations": list(
                self.rows(Violation).select_related("guardrail", "trace").order_by("-created_at", "-pk")[:8]
            ),
            "recent_evaluations": list(self.rows(Evaluation).order_by("-created_at", "-pk")[:5]),
        }
