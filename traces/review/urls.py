"""Routes of what reviewers browse: traces, violations and their review, the queue, guardrails'
pages (list, detail, quality) and calibration."""

from django.urls import path

from traces.review import api, calibration_views, guardrail_views, labelled_set_api, quality_api, queue_views, views

urlpatterns = [
    path("traces/", views.TraceListView.as_view(), name="trace-list"),
    path("traces/<int:pk>/", views.TraceDetailView.as_view(), name="trace-detail"),
    path("violations/", views.ViolationListView.as_view(), name="violation-list"),
    path("violations/chart.json", views.ViolationChartView.as_view(), name="violation-chart"),
    path("violations/queue/", queue_views.ReviewQueueView.as_view(), name="review-queue"),
    path("violations/review/", views.ViolationBulkReviewView.as_view(), name="violation-review-bulk"),
    path("violations/<int:pk>/", views.ViolationDetailView.as_view(), name="violation-detail"),
    path("violations/<int:pk>/review/", views.ViolationReviewView.as_view(), name="violation-review"),
    path("violations/<int:pk>/claim/", views.ViolationClaimView.as_view(), name="violation-claim"),
    path("calibrations/<int:pk>/", calibration_views.LabelView.as_view(), name="calibration-label"),
]

#: Under guardrails/: traces.urls puts the list and calibrate before other guardrail pages and
#: `guardrail_detail` after every other route under guardrails/.
guardrail_urlpatterns = [
    path("guardrails/", guardrail_views.GuardrailListView.as_view(), name="guardrail-list"),
    path("guardrails/<path:guardrail_id>/calibrate/", calibration_views.CalibrateView.as_view(), name="calibrate"),
]
guardrail_detail = path(
    "guardrails/<path:guardrail_id>/", guardrail_views.GuardrailDetailView.as_view(), name="guardrail-detail"
)

api_urlpatterns = [
    path("violations", api.ViolationListView.as_view(), name="api-violations"),
    path("violations/review", api.ViolationBulkReviewView.as_view(), name="api-violations-review"),
    path("violations/<int:pk>", api.ViolationDetailView.as_view(), name="api-violation"),
    path("violations/<int:pk>/review", api.ViolationReviewView.as_view(), name="api-violation-review"),
    path("violations/<int:pk>/claim", api.ViolationClaimView.as_view(), name="api-violation-claim"),
    path("violations/<int:pk>/unclaim", api.ViolationUnclaimView.as_view(), name="api-violation-unclaim"),
]

guardrail_api_urlpatterns = [
    path(
        "guardrails/<path:guardrail_id>/quality",
        quality_api.GuardrailQualityView.as_view(),
        name="api-guardrail-quality",
    ),
    path(
        "guardrails/<path:guardrail_id>/labelled-set",
        labelled_set_api.GuardrailLabelledSetView.as_view(),
        name="api-guardrail-labelled-set",
    ),
]
