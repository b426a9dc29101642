"""The pages of traces, evaluation runs, uploads, violations and the judge cost ledger."""

from django.urls import path

from traces import (
    calibration_views,
    evaluation_views,
    guardrail_views,
    ledger_views,
    picker,
    preview_views,
    queue_views,
    run_result_views,
    upload_views,
    views,
)

urlpatterns = [
    path("guardrails/", guardrail_views.GuardrailListView.as_view(), name="guardrail-list"),
    path("guardrails/previews/new/", preview_views.PreviewCreateView.as_view(), name="guardrail-preview-create"),
    path("guardrails/previews/<int:pk>/", preview_views.PreviewDetailView.as_view(), name="guardrail-preview"),
    path("guardrails/<str:guardrail_id>/", guardrail_views.GuardrailDetailView.as_view(), name="guardrail-detail"),
    path("traces/", views.TraceListView.as_view(), name="trace-list"),
    path("traces/picker.json", picker.TryTracePickerView.as_view(), name="try-trace-picker"),
    path("traces/<int:pk>/", views.TraceDetailView.as_view(), name="trace-detail"),
    path("evaluations/", evaluation_views.EvaluationListView.as_view(), name="evaluation-list"),
    path("evaluations/new/", evaluation_views.EvaluationCreateView.as_view(), name="evaluation-create"),
    path("evaluations/<int:pk>/", evaluation_views.EvaluationDetailView.as_view(), name="evaluation-detail"),
    path("evaluations/<int:pk>/results/", run_result_views.RunResultsView.as_view(), name="evaluation-results"),
    path("evaluations/<int:pk>/compare/", run_result_views.RunCompareView.as_view(), name="evaluation-compare"),
    path(
        "evaluations/<int:pk>/compare/traces/",
        run_result_views.RunCompareTracesView.as_view(),
        name="evaluation-compare-traces",
    ),
    path("evaluations/<int:pk>/cancel/", evaluation_views.EvaluationCancelView.as_view(), name="evaluation-cancel"),
    path("uploads/", upload_views.UploadListView.as_view(), name="upload-list"),
    path("uploads/new/", upload_views.UploadCreateView.as_view(), name="upload-create"),
    path("uploads/<int:pk>/", upload_views.UploadDetailView.as_view(), name="upload-detail"),
    path("violations/", views.ViolationListView.as_view(), name="violation-list"),
    path("violations/chart.json", views.ViolationChartView.as_view(), name="violation-chart"),
    path("violations/queue/", queue_views.ReviewQueueView.as_view(), name="review-queue"),
    path("violations/review/", views.ViolationBulkReviewView.as_view(), name="violation-review-bulk"),
    path("violations/<int:pk>/", views.ViolationDetailView.as_view(), name="violation-detail"),
    path("violations/<int:pk>/review/", views.ViolationReviewView.as_view(), name="violation-review"),
    path("guardrails/<str:guardrail_id>/calibrate/", calibration_views.CalibrateView.as_view(), name="calibrate"),
    path("calibrations/<int:pk>/", calibration_views.LabelView.as_view(), name="calibration-label"),
    path("ledger/", ledger_views.LedgerView.as_view(), name="ledger"),
    path("ledger/export.csv", ledger_views.LedgerExportView.as_view(), name="ledger-export"),
]

#: The detail page for an id stored before the id alphabet (it may hold a "/"), included
#: last by the root URLconf, after guardrails.urls.legacy_urlpatterns (see there).
legacy_urlpatterns = [
    path("guardrails/<path:guardrail_id>/", guardrail_views.GuardrailDetailView.as_view(), name="guardrail-detail")
]
