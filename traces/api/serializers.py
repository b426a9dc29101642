"""Read-side shapes of traces, violations and the ledger (camelCase, as on the wire).

Ingestion does not use serializers: see traces/ingest.py.
"""

from __future__ import annotations

from typing import Any

from rest_framework import serializers


class TraceSummarySerializer(serializers.Serializer):  # type: ignore[type-arg]
    id = serializers.CharField(source="trace_id")
    tenant = serializers.CharField(source="tenant.slug")
    agent = serializers.CharField()
    flow = serializers.CharField()
    startedAt = serializers.DateTimeField(source="started_at", allow_null=True)
    endedAt = serializers.DateTimeField(source="ended_at", allow_null=True)
    receivedAt = serializers.DateTimeField(source="received_at")
    withheld = serializers.BooleanField()
    contentHash = serializers.CharField(source="content_hash")


class TraceResultSerializer(serializers.Serializer):  # type: ignore[type-arg]
    guardrail = serializers.CharField(source="guardrail.guardrail_id")
    revision = serializers.IntegerField(source="revision.number")
    evaluation = serializers.IntegerField(source="evaluation_id", allow_null=True)
    mode = serializers.CharField()
    status = serializers.CharField()
    reason = serializers.CharField()
    durationMs = serializers.FloatField(source="duration_ms")
    createdAt = serializers.DateTimeField(source="created_at")


class TraceDetailSerializer(TraceSummarySerializer):
    document = serializers.JSONField(help_text="The RunTrace as stored (no output when withheld).")
    results = TraceResultSerializer(many=True)


class ViolationSerializer(serializers.Serializer):  # type: ignore[type-arg]
    id = serializers.IntegerField()
    tenant = serializers.CharField(source="tenant_slug")
    trace = serializers.CharField(source="trace_ref")
    guardrail = serializers.CharField(source="guardrail_ref")
    revision = serializers.IntegerField(source="revision_number")
    evaluation = serializers.IntegerField(source="evaluation_id", allow_null=True)
    action = serializers.CharField()
    severity = serializers.CharField()
    mode = serializers.CharField()
    reason = serializers.CharField()
    agent = serializers.CharField()
    flow = serializers.CharField()
    createdAt = serializers.DateTimeField(source="created_at")
    state = serializers.CharField()
    reviewedBy = serializers.CharField(source="reviewer", allow_null=True)
    reviewedAt = serializers.DateTimeField(source="reviewed_at", allow_null=True)
    reviewNote = serializers.CharField(source="review_note")


class ViolationReviewSerializer(serializers.Serializer):  # type: ignore[type-arg]
    reviewer = serializers.SerializerMethodField()
    fromState = serializers.CharField(source="from_state")
    toState = serializers.CharField(source="to_state")
    note = serializers.CharField()
    createdAt = serializers.DateTimeField(source="created_at")

    def get_reviewer(self, review: Any) -> str:
        return str(review.reviewer_label)


class ViolationDetailSerializer(ViolationSerializer):
    reviews = ViolationReviewSerializer(many=True, help_text="The review history, oldest first.")


class LedgerEntrySerializer(serializers.Serializer):  # type: ignore[type-arg]
    id = serializers.IntegerField()
    tenant = serializers.CharField(source="tenant_slug")
    guardrail = serializers.CharField(source="guardrail_ref")
    revision = serializers.IntegerField(source="revision_number", allow_null=True)
    trace = serializers.CharField(source="trace_ref", allow_null=True)
    evaluation = serializers.IntegerField(source="evaluation_id", allow_null=True)
    model = serializers.CharField(source="model_id")
    inputTokens = serializers.IntegerField(source="input_tokens")
    outputTokens = serializers.IntegerField(source="output_tokens")
    costUsd = serializers.DecimalField(source="cost_usd", max_digits=16, decimal_places=8,
                                       coerce_to_string=True)
    latencyMs = serializers.IntegerField(source="latency_ms")
    outcome = serializers.CharField()
    overBudgetCost = serializers.BooleanField(source="over_budget_cost")
    overBudgetLatency = serializers.BooleanField(source="over_budget_latency")
    cacheHit = serializers.BooleanField(source="cache_hit")
    createdAt = serializers.DateTimeField(source="created_at")


class LedgerGroupSerializer(serializers.Serializer):  # type: ignore[type-arg]
    guardrail = serializers.CharField(required=False)
    tenant = serializers.CharField(required=False)
    model = serializers.CharField(required=False)
    day = serializers.DateField(required=False)
    calls = serializers.IntegerField()
    overBudget = serializers.IntegerField()
    overBudgetCost = serializers.IntegerField()
    overBudgetLatency = serializers.IntegerField()
    cacheHits = serializers.IntegerField()
    inputTokens = serializers.IntegerField()
    outputTokens = serializers.IntegerField()
    costUsd = serializers.CharField(help_text="Exact decimal, as a string.")


class LedgerSummarySerializer(serializers.Serializer):  # type: ignore[type-arg]
    groupBy = serializers.ListField(child=serializers.CharField())
    groups = LedgerGroupSerializer(many=True)

    def to_representation(self, instance: Any) -> Any:
        return instance
