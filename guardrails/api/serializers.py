"""Read-side shapes of guardrails, revisions and checks."""

from __future__ import annotations

from rest_framework import serializers


class GuardrailSerializer(serializers.Serializer):  # type: ignore[type-arg]
    """A guardrail with the console's own fields; `document` is the wire document as authored."""

    id = serializers.CharField(source="guardrail_id")
    tenant = serializers.CharField(source="tenant.slug", allow_null=True,
                                   help_text="the owner tenant; null: the whole console")
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


class ValidationSerializer(serializers.Serializer):  # type: ignore[type-arg]
    valid = serializers.BooleanField()
    errors = serializers.ListField(  # type: ignore[assignment]  # the wire field is named `errors`
        child=serializers.DictField(child=serializers.CharField())
    )
    warnings = serializers.ListField(child=serializers.DictField(child=serializers.CharField()))
