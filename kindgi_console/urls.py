"""Top-level URL routes."""

from django.contrib import admin
from django.urls import include, path, re_path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView

from kindgi_console.api import json_not_found

api_v1 = [
    path("", include("guardrails.api.urls")),
    path("", include("traces.api.urls")),
    re_path(r"", json_not_found),  # an unknown API URL is a 404 in the API's error shape
]

urlpatterns = [
    path("admin/", admin.site.urls),
    path("api/v1/", include(api_v1)),
    path("api/schema/", SpectacularAPIView.as_view(), name="api-schema"),
    path("api/docs/", SpectacularSwaggerSplitView.as_view(url_name="api-schema"), name="api-docs"),
]
