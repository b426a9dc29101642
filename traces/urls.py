"""Pages of traces: evaluation runs and uploads."""

from django.urls import path

from traces import evaluation_views, upload_views

urlpatterns = [
    path("evaluations/", evaluation_views.EvaluationListView.as_view(), name="evaluation-list"),
    path("evaluations/new/", evaluation_views.EvaluationCreateView.as_view(), name="evaluation-create"),
    path("evaluations/<int:pk>/", evaluation_views.EvaluationDetailView.as_view(), name="evaluation-detail"),
    path("evaluations/<int:pk>/cancel/", evaluation_views.EvaluationCancelView.as_view(),
         name="evaluation-cancel"),
    path("uploads/", upload_views.UploadListView.as_view(), name="upload-list"),
    path("uploads/new/", upload_views.UploadCreateView.as_view(), name="upload-create"),
    path("uploads/<int:pk>/", upload_views.UploadDetailView.as_view(), name="upload-detail"),
]
