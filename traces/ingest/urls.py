"""Routes of ingestion: the upload pages, and the API that takes traces (REST, OTLP, evaluate)."""

from django.urls import path

from traces.ingest import api, upload_api, views
from traces.ingest.otlp.views import OtlpTracesView

urlpatterns = [
    path("uploads/", views.UploadListView.as_view(), name="upload-list"),
    path("uploads/new/", views.UploadCreateView.as_view(), name="upload-create"),
    path("uploads/<int:pk>/", views.UploadDetailView.as_view(), name="upload-detail"),
]

#: Under api/v1/, first of all its routes: a runtime calls it before every agent turn, and
#: no other route of api/v1/ matches "evaluate" (resolving it then tries no other pattern).
runtime_api_urlpatterns = [path("evaluate", api.EvaluateView.as_view(), name="api-evaluate")]

api_urlpatterns = [
    path("otlp/v1/traces", OtlpTracesView.as_view(), name="api-otlp-traces"),
    path("traces", api.TraceListView.as_view(), name="api-traces"),
    path("traces/<path:trace_id>", api.TraceDetailView.as_view(), name="api-trace"),
    path("uploads/<int:pk>", upload_api.UploadDetailView.as_view(), name="api-upload"),
]
