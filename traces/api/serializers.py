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
    """The shape of one ledger entry (traces.ledger.entry_dict writes it)."""

    id = serializers.IntegerField()
    tenant = serializers.CharField()
    guardrail = serializers.CharField()
    revision = serializers.IntegerField(allow_null=True)
    trace = serializers.CharField(allow_null=True, help_text="The runtime's trace id.")
    evaluation = serializers.IntegerField(allow_null=True)
    model = serializers.CharField(help_text="The judge model registration's id.")
    provider = serializers.CharField()
    modelName = serializers.CharField(help_text="The provider's model name.")
    inputTokens = serializers.IntegerField(allow_null=True, help_text="As the provider reported.")
    outputTokens = serializers.IntegerField(allow_null=True, help_text="As the provider reported.")
    costUsd = serializers.CharField(help_text="Exact decimal, as a string.")
    latencyMs = serializers.IntegerField()
    outcome = serializers.CharField(help_text="PASS, FAIL, the score, error, or cached.")
    verdict = serializers.CharField(allow_null=True)
    score = serializers.FloatField(allow_null=True)
    reason = serializers.CharField()
    error = serializers.CharField()
    billed = serializers.BooleanField()
    attempts = serializers.IntegerField()
    cacheHit = serializers.BooleanField()
    overBudgetCost = serializers.BooleanField()
    overBudgetLatency = serializers.BooleanField()
    createdAt = serializers.DateTimeField()


class LedgerGroupSerializer(serializers.Serializer):  # type: ignore[type-arg]
    guardrail = serializers.CharField(required=False)
    tenant = serializers.CharField(required=False)
    model = serializers.CharField(required=False)
    day = serializers.DateField(required=False)
    calls = serializers.IntegerField(help_text="Calls made to a provider.")
    billedCalls = serializers.IntegerField()
    cacheHits = serializers.IntegerField(help_text="Judgements answered from the cache.")
    errors = serializers.IntegerField()  # type: ignore[assignment]  # the wire field is named `errors`
    overBudget = serializers.IntegerField()
    overCost = serializers.IntegerField()
    overLatency = serializers.IntegerField()
    inputTokens = serializers.IntegerField()
    outputTokens = serializers.IntegerField()
    costUsd = serializers.CharField(help_text="Exact decimal, as a string.")


class LedgerSummarySerializer(serializers.Serializer):  # type: ignore[type-arg]
    groupBy = serializers.ListField(child=serializers.CharField())
    groups = LedgerGroupSerializer(many=True)

    def to_representation(self, instance: Any) -> Any:
        return instance
