"""The guardrail pages."""

from django.urls import path

from guardrails import views
from traces import preview_views

urlpatterns = [
    path("guardrails/", views.GuardrailListView.as_view(), name="guardrail-list"),
    path("guardrails/new/", views.GuardrailEditorView.as_view(), name="guardrail-create"),
    path("guardrails/import/", views.GuardrailImportView.as_view(), name="guardrail-import"),
    path("guardrails/export.json", views.GuardrailExportView.as_view(), name="guardrail-export"),
    path("guardrails/previews/new/", preview_views.PreviewCreateView.as_view(), name="guardrail-preview-create"),
    path("guardrails/previews/<int:pk>/", preview_views.PreviewDetailView.as_view(), name="guardrail-preview"),
    # `path`, not `str`: an id stored before the id alphabet (console-limits.schema.json)
    # may hold a "/"; the longer routes come first so that they are not read as an id.
    path("guardrails/<path:guardrail_id>/edit/", views.GuardrailEditorView.as_view(),
         name="guardrail-edit"),
    path("guardrails/<path:guardrail_id>/diff/", views.GuardrailDiffView.as_view(),
         name="guardrail-diff"),
    path("guardrails/<path:guardrail_id>/revisions/<int:number>/restore/", views.GuardrailRestoreView.as_view(),
         name="guardrail-restore"),
    path("guardrails/<path:guardrail_id>/toggle/", views.GuardrailToggleView.as_view(),
         name="guardrail-toggle"),
    path("guardrails/<path:guardrail_id>/shadow/", views.GuardrailShadowView.as_view(),
         name="guardrail-shadow"),
    path("guardrails/<path:guardrail_id>/delete/", views.GuardrailDeleteView.as_view(),
         name="guardrail-delete"),
    path("guardrails/<path:guardrail_id>/", views.GuardrailDetailView.as_view(),
         name="guardrail-detail"),
]
