from typing import Any

from django.contrib import admin

from kindgi_console.audit.admin import AuditedAdmin
from traces.ledger import judge_admin  # noqa: F401  (registers the judge's admin)
from traces.models import (
    Evaluation,
    EvaluationResult,
    JudgeLedgerEntry,
    RetentionPolicy,
    RunTrace,
    Violation,
    WorkerHeartbeat,
)


@admin.register(RunTrace)
class RunTraceAdmin(admin.ModelAdmin[RunTrace]):
    list_display = ["trace_id", "tenant", "agent", "flow", "withheld", "received_at"]
    list_filter = ["tenant", "withheld"]
    search_fields = ["trace_id", "agent", "flow"]
    list_select_related = ["tenant"]
    readonly_fields = ["content_hash", "received_at"]


@admin.register(Evaluation)
class EvaluationAdmin(admin.ModelAdmin[Evaluation]):
    list_display = ["id", "tenant", "mode", "status", "done", "total", "created_at"]
    list_filter = ["status", "mode", "tenant"]


@admin.register(EvaluationResult)
class EvaluationResultAdmin(admin.ModelAdmin[EvaluationResult]):
    list_display = ["trace", "guardrail", "revision", "evaluation", "mode", "status", "created_at"]
    list_filter = ["status", "mode"]
    raw_id_fields = ["trace", "revision", "evaluation", "guardrail"]


@admin.register(Violation)
class ViolationAdmin(AuditedAdmin):
    list_display = ["guardrail", "trace", "tenant", "severity", "action", "mode", "state", "created_at"]
    list_filter = ["state", "severity", "mode", "tenant"]
    raw_id_fields = ["trace", "result", "revision", "evaluation", "guardrail"]
    # What the chart's daily roll-up counts by is not edited here (traces.store.violation_days).
    readonly_fields = ["tenant", "guardrail", "severity", "created_at"]


@admin.register(JudgeLedgerEntry)
class JudgeLedgerEntryAdmin(admin.ModelAdmin[JudgeLedgerEntry]):
    list_display = [
        "created_at",
        "tenant",
        "guardrail",
        "model_id",
        "input_tokens",
        "output_tokens",
        "cost_usd",
        "latency_ms",
        "outcome",
        "cache_hit",
    ]
    list_filter = ["tenant", "model_id", "cache_hit"]
    raw_id_fields = ["trace", "revision", "evaluation", "guardrail"]

    # The ledger is written by traces.judge.ledger.record only (which keeps its daily roll-up):
    # here it is read, and an entry may be deleted (taken out of the roll-up on delete).
    def has_add_permission(self, request: Any) -> bool:
        return False

    def has_change_permission(self, request: Any, obj: Any = None) -> bool:
        return False


@admin.register(RetentionPolicy)
class RetentionPolicyAdmin(AuditedAdmin):
    """A tenant's setting: its changes are in the audit log like the tenant's own."""

    list_display = ["tenant", "days", "updated_at"]
    list_select_related = ["tenant"]


@admin.register(WorkerHeartbeat)
class WorkerHeartbeatAdmin(admin.ModelAdmin[WorkerHeartbeat]):
    """The heartbeats /healthz/workers reads: deleting the row of a process retired for good
    ends its 503 (a worker that stops cleanly removes its own)."""

    list_display = ["hostname", "pid", "seen_at"]
    readonly_fields = ["hostname", "pid", "seen_at"]

    def has_add_permission(self, request: Any) -> bool:
        return False
