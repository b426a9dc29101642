"""The guardrail pages (the list and the detail page are traces.review's, which read the traces).

Ordered with the other routes under guardrails/ by traces.urls. The `path` converter takes an
id stored before the id alphabet, which may hold a "/".
"""

from django.urls import path

from guardrails import views

urlpatterns = [
    path("guardrails/new/", views.GuardrailEditorView.as_view(), name="guardrail-create"),
    path("guardrails/import/", views.GuardrailImportView.as_view(), name="guardrail-import"),
    path("guardrails/export.json", views.GuardrailExportView.as_view(), name="guardrail-export"),
    path("guardrails/<path:guardrail_id>/edit/", views.GuardrailEditorView.as_view(), name="guardrail-edit"),
    path("guardrails/<path:guardrail_id>/diff/", views.GuardrailDiffView.as_view(), name="guardrail-diff"),
    path(
        "guardrails/<path:guardrail_id>/revisions/<int:number>/restore/",
        views.GuardrailRestoreView.as_view(),
        name="guardrail-restore",
    ),
    path("guardrails/<path:guardrail_id>/toggle/", views.GuardrailToggleView.as_view(), name="guardrail-toggle"),
    path("guardrails/<path:guardrail_id>/shadow/", views.GuardrailShadowView.as_view(), name="guardrail-shadow"),
    path(
        "guardrails/<path:guardrail_id>/fail-mode/", views.GuardrailFailModeView.as_view(), name="guardrail-fail-mode"
    ),
    path("guardrails/<path:guardrail_id>/stages/", views.GuardrailStagesView.as_view(), name="guardrail-stages"),
    path("guardrails/<path:guardrail_id>/delete/", views.GuardrailDeleteView.as_view(), name="guardrail-delete"),
]
