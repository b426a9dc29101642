from django.urls import path

from guardrails.api import views

urlpatterns = [
    path("guardrails", views.GuardrailListView.as_view(), name="api-guardrails"),
    path("guardrails/validate", views.GuardrailValidateView.as_view(),
         name="api-guardrail-validate"),
    path("guardrails/export", views.GuardrailExportView.as_view(), name="api-guardrail-export"),
    # `path`: an id stored before the id alphabet may hold a "/" (the longer routes first).
    path("guardrails/<path:guardrail_id>/shadow", views.GuardrailShadowView.as_view(),
         name="api-guardrail-shadow"),
    path("guardrails/<path:guardrail_id>/revisions", views.GuardrailRevisionListView.as_view(),
         name="api-guardrail-revisions"),
    path("guardrails/<path:guardrail_id>", views.GuardrailDetailView.as_view(),
         name="api-guardrail"),
    path("checks", views.CheckListView.as_view(), name="api-checks"),
    path("schemas/guardrail.schema.json", views.SchemaView.as_view(),
         {"name": "guardrail.schema.json"}, name="api-schema-guardrail"),
    path("schemas/runtrace.schema.json", views.SchemaView.as_view(),
         {"name": "runtrace.schema.json"}, name="api-schema-runtrace"),
]
