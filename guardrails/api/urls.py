from django.urls import path

from guardrails.api import checks, guardrails, judge, quality, trying
from traces.api import previews

urlpatterns = [
    path("guardrails", guardrails.GuardrailListView.as_view(), name="api-guardrails"),
    path("guardrails/validate", trying.GuardrailValidateView.as_view(),
         name="api-guardrail-validate"),
    path("guardrails/try", trying.GuardrailTryView.as_view(), name="api-guardrail-try"),
    path("guardrails/export", guardrails.GuardrailExportView.as_view(), name="api-guardrail-export"),
    path("guardrails/preview", previews.PreviewStartView.as_view(), name="api-guardrail-preview"),
    path("guardrails/previews/<int:pk>", previews.PreviewDetailView.as_view(), name="api-guardrail-preview-read"),
    # `path`: an id stored before the id alphabet may hold a "/" (the longer routes first).
    path("guardrails/<path:guardrail_id>/shadow", quality.GuardrailShadowView.as_view(),
         name="api-guardrail-shadow"),
    path("guardrails/<path:guardrail_id>/quality", quality.GuardrailQualityView.as_view(),
         name="api-guardrail-quality"),
    path("guardrails/<path:guardrail_id>/revisions", guardrails.GuardrailRevisionListView.as_view(),
         name="api-guardrail-revisions"),
    path("guardrails/<path:guardrail_id>", guardrails.GuardrailDetailView.as_view(),
         name="api-guardrail"),
    path("checks", checks.CheckListView.as_view(), name="api-checks"),
    path("judge-models", judge.JudgeModelListView.as_view(), name="api-judge-models"),
    path("judge-models/<str:model_id>", judge.JudgeModelDetailView.as_view(),
         name="api-judge-model"),
    path("tenants/<slug:slug>/judge-policy", judge.TenantJudgePolicyView.as_view(),
         name="api-tenant-judge-policy"),
    path("schemas/guardrail.schema.json", checks.SchemaView.as_view(),
         {"name": "guardrail.schema.json"}, name="api-schema-guardrail"),
    path("schemas/runtrace.schema.json", checks.SchemaView.as_view(),
         {"name": "runtrace.schema.json"}, name="api-schema-runtrace"),
]
