"""Read-side shapes of violations and their reviews (camelCase, as on the wire), and the
OpenAPI declarations of the review bodies and the quality answer."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import OpenApiResponse
from rest_framework import serializers

from traces.review import workflow


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
    queue = serializers.CharField(
        allow_null=True, help_text="The review queue it landed in (an escalate guardrail's escalateTo), or null."
    )
    assignee = serializers.CharField(allow_null=True, help_text="Who claimed it (a user name or a key label), or null.")
    assignedAt = serializers.DateTimeField(source="assigned_at", allow_null=True, help_text="When it was claimed.")


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


REVIEW_BODY = {
    "application/json": {
        "type": "object",
        "required": ["state"],
        "properties": {
            "state": {"type": "string", "enum": list(workflow.STATES)},
            "note": {"type": "string", "maxLength": workflow.MAX_NOTE},
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
            "state": {"type": "string", "enum": list(workflow.STATES)},
            "note": {"type": "string", "maxLength": workflow.MAX_NOTE},
        },
    }
}

CLAIM = {
    "type": "object",
    "required": ["id", "assignee", "assignedAt"],
    "properties": {
        "id": {"type": "integer"},
        "assignee": {"type": "string", "nullable": True, "description": "Who holds it now; null: nobody."},
        "assignedAt": {"type": "string", "format": "date-time", "nullable": True},
    },
}

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
                "items": {
                    "type": "object",
                    "properties": {
                        "revision": {"type": "integer"},
                        **QUALITY_FIGURES,
                        "calibration": {
                            "type": "object",
                            "nullable": True,
                            "description": "The agreement of the revision's newest calibration sample "
                            "(as `calibration.agreement`), or null when it has none.",
                        },
                    },
                },
            },
            "calibration": {
                "type": "object",
                "nullable": True,
                "description": "The newest calibration sample (the guardrail, of any kind, against "
                "people's labels of a sample stratified over its passes and fails): `agreement` has "
                "precision and recall (recall weighs the strata by `drawnFrom`), accuracy, Cohen's "
                "kappa, false-positive and false-negative rates, with 95% intervals, and the "
                "disagreeing traces; `people`: agreement between the reviewers who labelled it (Cohen's "
                "kappa over the traces two of them labelled, with the traces they disagree on and the "
                "guardrail's verdict and reason on each); `stale` "
                "when the guardrail has a newer revision.",
            },
        },
    }
)


# Evaluation runs: a run, its results and the comparison of two runs.
