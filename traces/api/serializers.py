"""Read-side shapes of traces, violations and the ledger (camelCase, as on the wire), and
the OpenAPI declarations of the bodies and answers the views shape by hand.

Ingestion does not use serializers: see traces/ingest.py.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import OpenApiResponse
from rest_framework import serializers

from guardrails.engine.evaluate import SKIP_PARTS
from kindgi_console.openapi import ERRORS_SCHEMA, ref
from traces import evaluations, review, run_results
from traces.models import Evaluation, RunComparison


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
    "required": ["turn", "reason", "results"],
    "properties": {
        "turn": {"type": "string", "enum": ["completed", "failed"]},
        "reason": {"type": "string", "nullable": True, "enum": ["guardrail-violation", None]},
        "results": {"type": "array", "items": {"type": "object"}},
        "trace": ITEM_SCHEMA,
    },
}
REVIEW_BODY = {
    "application/json": {
        "type": "object",
        "required": ["state"],
        "properties": {
            "state": {"type": "string", "enum": list(review.STATES)},
            "note": {"type": "string", "maxLength": review.MAX_NOTE},
        },
    }
}
REVIEW_OUTCOME = {
    "type": "object",
    "required": ["state", "reviewed", "refused"],
    "properties": {
        "state": {"type": "string"},
        "reviewed": {"type": "array", "items": {"type": "integer"}},
        "refused": {
            "type": "array",
            "items": {"type": "object", "properties": {"id": {"type": "integer"}, "message": {"type": "string"}}},
        },
    },
}
BULK_REVIEW_BODY = {
    "application/json": {
        "type": "object",
        "required": ["state"],
        "description": "`ids` (violation ids) or `filter` (the filters of GET violations), not both.",
        "properties": {
            "ids": {"type": "array", "items": {"type": "integer"}},
            "filter": {"type": "object", "additionalProperties": {"type": "string"}},
            "state": {"type": "string", "enum": list(review.STATES)},
            "note": {"type": "string", "maxLength": review.MAX_NOTE},
        },
    }
}
ESTIMATE_SCHEMA = {
    "type": "object",
    "required": ["calls", "cached", "costUsd", "traces", "sampled", "extrapolated", "models", "errors"],
    "properties": {
        "tenant": {"type": "string"},
        "calls": {"type": "integer", "description": "Judge calls to pay (cache hits left out)."},
        "cached": {"type": "integer", "description": "Judgements the cache will answer."},
        "costUsd": {"type": "string", "description": "Upper estimate, exact decimal string."},
        "traces": {"type": "integer"},
        "sampled": {"type": "integer", "description": "Traces read to estimate."},
        "extrapolated": {"type": "boolean", "description": "True when the selection was larger than the sample."},
        "models": {
            "type": "object",
            "additionalProperties": {"type": "string"},
            "description": "Guardrail id -> the judge model it routes to.",
        },
        "errors": {
            "type": "object",
            "additionalProperties": {"type": "string"},
            "description": "Guardrail id -> why no judge model fits.",
        },
    },
}


# Guardrails' endpoints that read or evaluate traces (guardrails/try, guardrails/{id}/quality).
TRY_BODY = {
    "application/json": {
        "type": "object",
        "required": ["guardrail"],
        "properties": {
            "guardrail": {"type": "object", "description": "The guardrail document being authored."},
            "trace": {"type": "object", "description": "A RunTrace to evaluate it against."},
            "traceId": {
                "type": "string",
                "description": "Or the runtime id of a stored trace of one of the caller's tenants.",
            },
            "mode": {"type": "string", "enum": ["runtime", "ci"], "default": "ci"},
        },
    }
}
TRY_RESPONSE = OpenApiResponse(
    {"type": "object", "properties": {"result": {"type": "object"}}},
    description="The engine's result: guardrail, revision, status (pass, fail, error, "
    "skipped), reason, action, severity, durationMs, details.",
)
QUALITY_FIGURES = {
    "violations": {"type": "integer"},
    "reviewed": {"type": "integer"},
    "falsePositives": {"type": "integer"},
    "precision": {
        "type": "number",
        "nullable": True,
        "description": "1 - false positives / reviewed; null before any review.",
    },
    "precisionInterval": {
        "type": "array",
        "items": {"type": "number"},
        "nullable": True,
        "description": "The 95% Wilson interval of the precision.",
    },
    "coverage": {"type": "number", "nullable": True, "description": "reviewed / violations"},
}
QUALITY_RESPONSE = OpenApiResponse(
    {
        "type": "object",
        "properties": {
            "guardrail": {"type": "string"},
            "since": {"type": "string", "nullable": True},
            "until": {"type": "string", "nullable": True},
            **QUALITY_FIGURES,
            "revisions": {
                "type": "array",
                "items": {"type": "object", "properties": {"revision": {"type": "integer"}, **QUALITY_FIGURES}},
            },
            "calibration": {
                "type": "object",
                "nullable": True,
                "description": "The newest calibration sample (an "
                "llm-judge against people's labels): accuracy, Cohen's kappa, false-positive and "
                "false-negative rates with 95% intervals, the disagreeing traces; `stale` when the "
                "guardrail has a newer revision.",
            },
        },
    }
)


# Evaluation runs: a run, its results and the comparison of two runs.
RUN_SCHEMA = {
    "type": "object",
    "required": ["id", "tenant", "status", "mode", "guardrails", "filters", "progress", "summary"],
    "properties": {
        "id": {"type": "integer"},
        "url": {"type": "string"},
        "tenant": {"type": "string"},
        "status": {"type": "string", "enum": [s.value for s in Evaluation.Status]},
        "mode": {"type": "string", "enum": ["ci", "runtime"]},
        "guardrails": {
            "type": "array",
            "items": {"type": "object", "properties": {"id": {"type": "string"}, "revision": {"type": "integer"}}},
        },
        "filters": {"type": "object"},
        "progress": {
            "type": "object",
            "properties": {"done": {"type": "integer"}, "total": {"type": "integer"}, "percent": {"type": "integer"}},
        },
        "summary": {
            "type": "object",
            "additionalProperties": {
                "type": "object",
                "properties": {name: {"type": "integer"} for name in evaluations.STATUSES},
            },
        },
        "startedBy": {"type": "string"},
        "createdAt": {"type": "string", "format": "date-time"},
        "startedAt": {"type": "string", "format": "date-time", "nullable": True},
        "finishedAt": {"type": "string", "format": "date-time", "nullable": True},
        "error": {"type": "string"},
    },
}


RUN_PAGE_SCHEMA = {
    "type": "object",
    "required": ["next", "results"],
    "properties": {
        "next": {"type": "string", "format": "uri", "nullable": True},
        "results": {"type": "array", "items": RUN_SCHEMA},
    },
}


START_BODY = {
    "application/json": {
        "type": "object",
        "properties": {
            "tenant": {"type": "string", "description": "The tenant (a tenant-bound key's by default)."},
            "guardrails": {
                "type": "array",
                "items": {"type": "string"},
                "description": "Guardrail ids; absent or empty: every enabled guardrail.",
            },
            "filters": {
                "type": "object",
                "properties": {
                    "agent": {"type": "string"},
                    "flow": {"type": "string"},
                    # Empty (or null) is no bound, as the run form sends an unset date.
                    "since": {"type": "string", "anyOf": [{"format": "date-time"}, {"maxLength": 0}], "nullable": True},
                    "until": {"type": "string", "anyOf": [{"format": "date-time"}, {"maxLength": 0}], "nullable": True},
                    "upload": {"type": "integer"},
                },
            },
            "mode": {"type": "string", "enum": ["ci", "runtime"], "default": "ci"},
        },
        "additionalProperties": False,
    }
}


RESULT_SCHEMA = {
    "type": "object",
    "properties": {
        "id": {"type": "integer"},
        "trace": {"type": "string"},
        "traceUrl": {"type": "string"},
        "guardrail": {"type": "string"},
        "revision": {"type": "integer"},
        "status": {"type": "string", "enum": list(run_results.STATUSES)},
        "reason": {"type": "string"},
        "skipReason": {
            "type": "string",
            "nullable": True,
            "enum": [*SKIP_PARTS, None],
            "description": "Of a skipped result: the part of the scope that did not select the trace.",
        },
        "action": {"type": "string"},
        "severity": {"type": "string", "nullable": True},
        "violation": {"type": "integer", "nullable": True},
        "reviewState": {"type": "string", "nullable": True},
    },
}


RESULT_PAGE_SCHEMA = {
    "type": "object",
    "required": ["next", "results"],
    "properties": {"next": {"type": "string", "nullable": True}, "results": {"type": "array", "items": RESULT_SCHEMA}},
}


COMPARED_TRACES = {
    "type": "array",
    "items": {
        "type": "object",
        "properties": {"trace": {"type": "string"}, "traceUrl": {"type": "string"}, "reason": {"type": "string"}},
    },
}


COMPARE_SCHEMA = {
    "type": "object",
    "required": ["evaluation", "with", "status", "progress", "guardrails"],
    "properties": {
        "evaluation": {"type": "integer"},
        "with": {"type": "integer"},
        "status": {
            "type": "string",
            "enum": ["waiting", *[s.value for s in RunComparison.Status]],
            "description": "`succeeded`: the figures are complete. `waiting`: a run has not "
            "finished. `queued`, `running`: being computed (answered 202).",
        },
        "progress": {
            "type": "object",
            "properties": {"done": {"type": "integer"}, "total": {"type": "integer"}, "percent": {"type": "integer"}},
        },
        "error": {"type": "string"},
        "guardrails": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "guardrail": {"type": "string"},
                    "revision": {"type": "integer", "nullable": True},
                    "withRevision": {"type": "integer", "nullable": True},
                    "failing": {"type": "integer"},
                    "withFailing": {"type": "integer"},
                    "newlyFailing": {"type": "integer"},
                    "noLongerFailing": {"type": "integer"},
                    "newlyFailingTraces": COMPARED_TRACES,
                    "noLongerFailingTraces": COMPARED_TRACES,
                    "newlyFailingCursor": {
                        "type": "string",
                        "nullable": True,
                        "description": "The next page's cursor for compare/traces.",
                    },
                    "noLongerFailingCursor": {"type": "string", "nullable": True},
                },
            },
        },
    },
}


CHANGES_SCHEMA = {
    "type": "object",
    "required": ["next", "results"],
    "properties": {"next": {"type": "string", "nullable": True}, "results": COMPARED_TRACES},
}
