"""Read-side shapes of the judge cost ledger (camelCase, as on the wire)."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers


class LedgerEntrySerializer(serializers.Serializer):  # type: ignore[type-arg]
    """The shape of one ledger entry (traces.judge.ledger.entry_dict writes it)."""

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
