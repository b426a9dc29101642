"""Read-side shapes of traces (camelCase, as on the wire), and the OpenAPI declarations of the
trace, batch and verdict bodies and answers the views shape by hand.

Ingestion does not use serializers: see traces/ingest/documents.py.
"""

from __future__ import annotations

from drf_spectacular.utils import OpenApiResponse
from rest_framework import serializers

from guardrails.engine.stages import STAGES
from kindgi_console.openapi import ERRORS_SCHEMA, ref


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
    stage = serializers.CharField(
        allow_blank=True,
        help_text="The stage of the turn a runtime checked (input, tool-call, output); empty: the whole trace "
        "(ingestion, a run).",
    )
    step = serializers.IntegerField(help_text="At stage tool-call, the position of the proposed call in toolCalls.")


class TraceDetailSerializer(TraceSummarySerializer):
    document = serializers.JSONField(help_text="The RunTrace as stored (no output when withheld).")
    results = TraceResultSerializer(many=True)


# ---------------------------------------------------------------------------- OpenAPI
# The bodies and answers that are not serializers, as the views' extend_schema names them.
#: The error answer as the run, upload and preview endpoints declare it.
ERRORS = OpenApiResponse({"type": "object", "properties": {"errors": {"type": "array"}}})


ITEM_SCHEMA = {
    "type": "object",
    "required": ["index", "id", "status", "errors"],
    "properties": {
        "index": {"type": "integer"},
        "id": {"type": "string", "nullable": True},
        "status": {"type": "string", "enum": ["created", "duplicate", "conflict", "invalid"]},
        "errors": ERRORS_SCHEMA["properties"]["errors"],  # type: ignore[index]
    },
}
BATCH_SCHEMA = {
    "type": "object",
    "required": ["results"],
    "properties": {"results": {"type": "array", "items": ITEM_SCHEMA}},
}
TRACE_BODY = {
    "application/json": {
        "description": 'One RunTrace, or a batch: {"traces": [RunTrace, ...]}.',
        "oneOf": [
            ref("RunTrace"),
            {
                "type": "object",
                "required": ["traces"],
                "additionalProperties": False,
                "properties": {
                    "traces": {
                        "type": "array",
                        "description": "RunTraces; each one stands alone: an invalid one is reported "
                        "in its result and the others are stored.",
                        "items": {},
                    }
                },
            },
        ],
    }
}
VERDICT_BODY = {"application/json": ref("RunTrace")}


VERDICT_SCHEMA = {
    "type": "object",
    "required": ["turn", "reason", "stage", "haltedBy", "results"],
    "properties": {
        "turn": {"type": "string", "enum": ["completed", "failed"]},
        "reason": {"type": "string", "nullable": True, "enum": ["guardrail-violation", "guardrail-error", None]},
        "stage": {"type": "string", "enum": list(STAGES), "description": "The stage of the turn checked."},
        "haltedBy": {
            "type": "string",
            "nullable": True,
            "description": "The first guardrail that halts the turn (at tool-call: that forbids the proposed "
            "call, which the runtime must not run); null when the turn completes.",
        },
        "results": {
            "type": "array",
            "items": {"type": "object"},
            "description": "One per guardrail; a skipped one says why in `skipReason` (a part of its scope, or "
            "`stage`: it does not apply at this stage).",
        },
        "error": {
            "type": "object",
            "description": "With reason guardrail-error: the guardrail that failed closed and its error.",
            "required": ["guardrail", "message"],
            "properties": {"guardrail": {"type": "string"}, "message": {"type": "string"}},
        },
        "trace": {
            **ITEM_SCHEMA,
            "properties": {
                **ITEM_SCHEMA["properties"],  # type: ignore[dict-item]
                "status": {
                    "type": "string",
                    "enum": ["created", "duplicate", "updated", "conflict", "invalid"],
                    "description": "updated: the document extends the turn stored under its id (a later stage).",
                },
            },
        },
    },
}
