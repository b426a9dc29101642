"""Routes of evaluation runs, their results and comparisons, and a draft's previews (Try it, impact)."""

from django.urls import path

from traces.runs import api, picker, preview_api, preview_views, result_views, try_api, views

urlpatterns = [
    path("traces/picker.json", picker.TryTracePickerView.as_view(), name="try-trace-picker"),
    path("evaluations/", views.EvaluationListView.as_view(), name="evaluation-list"),
    path("evaluations/new/", views.EvaluationCreateView.as_view(), name="evaluation-create"),
    path("evaluations/<int:pk>/", views.EvaluationDetailView.as_view(), name="evaluation-detail"),
    path("evaluations/<int:pk>/results/", result_views.RunResultsView.as_view(), name="evaluation-results"),
    path("evaluations/<int:pk>/compare/", result_views.RunCompareView.as_view(), name="evaluation-compare"),
    path(
        "evaluations/<int:pk>/compare/traces/",
        result_views.RunCompareTracesView.as_view(),
        name="evaluation-compare-traces",
    ),
    path("evaluations/<int:pk>/cancel/", views.EvaluationCancelView.as_view(), name="evaluation-cancel"),
]

#: Under guardrails/: traces.urls puts them before the guardrail detail page.
guardrail_urlpatterns = [
    path("guardrails/previews/new/", preview_views.PreviewCreateView.as_view(), name="guardrail-preview-create"),
    path("guardrails/previews/<int:pk>/", preview_views.PreviewDetailView.as_view(), name="guardrail-preview"),
]

api_urlpatterns = [
    path("evaluations/estimate", api.EvaluationEstimateView.as_view(), name="api-evaluation-estimate"),
    path("evaluations", api.EvaluationListView.as_view(), name="api-evaluations"),
    path("evaluations/<int:pk>", api.EvaluationDetailView.as_view(), name="api-evaluation"),
    path("evaluations/<int:pk>/results", api.EvaluationResultsView.as_view(), name="api-evaluation-results"),
    path("evaluations/<int:pk>/compare", api.EvaluationCompareView.as_view(), name="api-evaluation-compare"),
    path(
        "evaluations/<int:pk>/compare/traces",
        api.EvaluationCompareTracesView.as_view(),
        name="api-evaluation-compare-traces",
    ),
    path("evaluations/<int:pk>/cancel", api.EvaluationCancelView.as_view(), name="api-evaluation-cancel"),
]

#: Under guardrails/: traces.urls puts them before guardrails' `guardrails/<path:guardrail_id>`.
guardrail_api_urlpatterns = [
    path("guardrails/try", try_api.GuardrailTryView.as_view(), name="api-guardrail-try"),
    path("guardrails/preview", preview_api.PreviewStartView.as_view(), name="api-guardrail-preview"),
    path(
        "guardrails/preview/estimate", preview_api.PreviewEstimateView.as_view(), name="api-guardrail-preview-estimate"
    ),
    path("guardrails/previews/<int:pk>", preview_api.PreviewDetailView.as_view(), name="api-guardrail-preview-read"),
]
