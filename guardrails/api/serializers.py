"""Read-side shapes of guardrails, revisions and checks, and the OpenAPI declarations of the
bodies, parameters and answers the views shape by hand."""

from __future__ import annotations

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse
from rest_framework import serializers

from guardrails.engine.stages import STAGES
from kindgi_console.openapi import ref


class GuardrailSerializer(serializers.Serializer):  # type: ignore[type-arg]
    """A guardrail with the console's own fields; `document` is the wire document as authored."""

    id = serializers.CharField(source="guardrail_id")
    tenant = serializers.CharField(
        source="tenant.slug", allow_null=True, help_text="the owner tenant; null: the whole console"
    )
    name = serializers.CharField()
    kind = serializers.CharField()
    check = serializers.CharField(source="check_name")
    severity = serializers.CharField()
    onViolation = serializers.CharField(source="on_violation")
    enabled = serializers.BooleanField()
    revision = serializers.IntegerField()
    updatedAt = serializers.DateTimeField(source="updated_at")
    document = serializers.JSONField()


class RevisionSerializer(serializers.Serializer):  # type: ignore[type-arg]
    number = serializers.IntegerField()
    createdBy = serializers.CharField(source="created_by_label")
    createdAt = serializers.DateTimeField(source="created_at")
    document = serializers.JSONField()


class CheckSerializer(serializers.Serializer):  # type: ignore[type-arg]
    id = serializers.CharField()
    kind = serializers.CharField()
    description = serializers.CharField()
    configSchema = serializers.JSONField(source="config_schema", allow_null=True)
    builtin = serializers.BooleanField()
    pack = serializers.CharField(allow_null=True)
    packVersion = serializers.CharField(source="pack_version", allow_null=True)
    stages = serializers.ListField(
        child=serializers.ChoiceField(choices=list(STAGES)),
        help_text="The stages of a turn at which its guardrails apply at runtime unless their author chose others.",
    )


class ValidationSerializer(serializers.Serializer):  # type: ignore[type-arg]
    valid = serializers.BooleanField()
    errors = serializers.ListField(  # type: ignore[assignment]  # the wire field is named `errors`
        child=serializers.DictField(child=serializers.CharField())
    )
    warnings = serializers.ListField(child=serializers.DictField(child=serializers.CharField()))


# ---------------------------------------------------------------------------- OpenAPI
# The bodies, parameters and answers that are not serializers, as extend_schema names them.
#: A guardrail as the console stores it: schema 1.1.0 and the console's own limits.
GUARDRAIL_BODY = {"application/json": {"allOf": [ref("GuardrailDocument"), ref("GuardrailConsoleLimits")]}}


ANY_BODY = {"application/json": {"description": "Any JSON: a guardrail to validate."}}


DOCUMENT_RESPONSE = OpenApiResponse(
    ref("GuardrailDocument"), description="The guardrail's wire document, exactly as authored."
)
TENANT_PARAM = OpenApiParameter(
    "tenant",
    OpenApiTypes.STR,
    description="The tenant the new guardrail belongs to (a "
    "tenant-bound key's own by default, or the only one a person authors for). A console "
    "admin naming none creates a console-wide guardrail.",
)
IF_MATCH_PARAM = OpenApiParameter(
    "If-Match",
    OpenApiTypes.STR,
    location=OpenApiParameter.HEADER,
    description='The ETag of the revision this change was made on (`"<id>@<revision>"`, as GET '
    "answers it; several may be listed, `*` matches any). When the guardrail's current revision "
    "is none of them, nothing is saved and the answer is 412 with the current revision. Without "
    "it, the document replaces whatever revision is current.",
)
ETAG_HEADER = OpenApiParameter(
    "ETag",
    OpenApiTypes.STR,
    location=OpenApiParameter.HEADER,
    response=[200, 201, 412],
    description='The guardrail\'s current revision, `"<id>@<revision>"`: send it back as If-Match.',
)
REVISION_CONFLICT_RESPONSE = OpenApiResponse(
    {
        "type": "object",
        "required": ["errors", "current"],
        "properties": {
            "errors": {
                "type": "array",
                "items": {
                    "type": "object",
                    "required": ["path", "message"],
                    "properties": {"path": {"type": "string"}, "message": {"type": "string"}},
                },
            },
            "current": {
                "type": "object",
                "description": "The guardrail as it is now.",
                "required": ["revision", "etag", "document"],
                "properties": {
                    "revision": {"type": "integer"},
                    "etag": {"type": "string"},
                    "document": ref("GuardrailDocument"),
                    "savedBy": {"type": "string"},
                    "savedAt": {"type": "string", "format": "date-time"},
                },
            },
            "changes": {
                "type": "object",
                "description": "When If-Match named one earlier revision: the lines that changed from "
                "it to the current one (the revision diff page's rows).",
                "properties": {
                    "from": {"type": "integer"},
                    "to": {"type": "integer"},
                    "lines": {
                        "type": "array",
                        "items": {
                            "type": "object",
                            "properties": {
                                "kind": {"enum": ["hunk", "ctx", "add", "del"]},
                                "old": {"type": ["integer", "null"]},
                                "new": {"type": ["integer", "null"]},
                                "text": {"type": "string"},
                            },
                        },
                    },
                },
            },
        },
    },
    description="If-Match names no current revision: someone saved the guardrail meanwhile. Nothing was saved.",
)
ENABLED_PARAM = OpenApiParameter(
    "enabled",
    OpenApiTypes.BOOL,
    description="Switch the guardrail on or off "
    "(the console's switch, not part of the document). New guardrails are enabled.",
)
SHADOW_PARAM = OpenApiParameter(
    "shadow",
    OpenApiTypes.BOOL,
    description="true: save the new revision in shadow (evaluated and recorded, never halting, never a "
    "violation); the revision enforced until now stays enforced beside it until the new one is promoted "
    "(`POST guardrails/{id}/shadow` with `shadow: false`). false: enforce the new revision at once. "
    "Absent: the guardrail keeps its state (one in shadow stays in shadow; a new one is enforced).",
)
SHADOW_BODY = {
    "application/json": {
        "type": "object",
        "required": ["shadow"],
        "additionalProperties": False,
        "properties": {
            "shadow": {
                "type": "boolean",
                "description": "true: the current revision in shadow, nothing enforced beside it (a guardrail "
                "already in shadow beside an enforced revision keeps it); false: the current revision "
                "promoted to enforced, the one beside it no longer enforced.",
            },
            "sampleRate": {
                "type": "number",
                "nullable": True,
                "exclusiveMinimum": 0,
                "maximum": 1,
                "description": "In shadow, the share of matching traces evaluated; null: every one.",
            },
        },
    }
}
SHADOW_RESPONSE = OpenApiResponse(
    {
        "type": "object",
        "properties": {
            "guardrail": {"type": "string"},
            "revision": {"type": "integer", "description": "the current revision (in shadow when `shadow`)"},
            "shadow": {"type": "boolean"},
            "sampleRate": {"type": "number", "nullable": True},
            "enforcedRevision": {
                "type": "integer",
                "nullable": True,
                "description": "in shadow, the revision still enforced beside the current one; null: none",
            },
        },
    }
)
