from django.urls import path

from guardrails.api import checks, fail_mode, guardrails, shadow, stages, validate

urlpatterns = [
    path("guardrails", guardrails.GuardrailListView.as_view(), name="api-guardrails"),
    path("guardrails/validate", validate.GuardrailValidateView.as_view(), name="api-guardrail-validate"),
    path("guardrails/export", guardrails.GuardrailExportView.as_view(), name="api-guardrail-export"),
    # `path`: an id stored before the id alphabet may hold a "/" (the longer routes first).
    path("guardrails/<path:guardrail_id>/shadow", shadow.GuardrailShadowView.as_view(), name="api-guardrail-shadow"),
    path("guardrails/<path:guardrail_id>/stages", stages.GuardrailStagesView.as_view(), name="api-guardrail-stages"),
    path(
        "guardrails/<path:guardrail_id>/fail-mode",
        fail_mode.GuardrailFailModeView.as_view(),
        name="api-guardrail-fail-mode",
    ),
    path(
        "guardrails/<path:guardrail_id>/revisions",
        guardrails.GuardrailRevisionListView.as_view(),
        name="api-guardrail-revisions",
    ),
    path("guardrails/<path:guardrail_id>", guardrails.GuardrailDetailView.as_view(), name="api-guardrail"),
    path("checks", checks.CheckListView.as_view(), name="api-checks"),
    path(
        "schemas/guardrail.schema.json",
        checks.SchemaView.as_view(),
        {"name": "guardrail.schema.json"},
        name="api-schema-guardrail",
    ),
    path(
        "schemas/runtrace.schema.json",
        checks.SchemaView.as_view(),
        {"name": "runtrace.schema.json"},
        name="api-schema-runtrace",
    ),
]
