"""REST endpoint of uploads: how far the processing of an uploaded trace file got."""

from __future__ import annotations

from typing import Any

from django.shortcuts import get_object_or_404
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework.request import Request
from rest_framework.response import Response

from kindgi_console.api import ConsoleAPIView
from traces.ingest.serializers import ERRORS
from traces.models import Upload


def upload_as_dict(upload: Upload) -> dict[str, Any]:
    return {
        "id": upload.pk,
        "tenant": upload.tenant.slug,
        "name": upload.original_name,
        "size": upload.size,
        "status": upload.status,
        "progress": {"done": upload.done, "total": upload.total},
        "lines": {
            "total": upload.lines_total,
            "stored": upload.lines_stored,
            "duplicate": upload.lines_duplicate,
            "conflict": upload.lines_conflict,
            "invalid": upload.lines_invalid,
        },
        "errors": upload.errors,
        "errorsTotal": upload.errors_total,
        "failure": upload.failure,
        "evaluation": upload.evaluation_id,
        "createdAt": upload.created_at.isoformat(),
        "finishedAt": upload.finished_at.isoformat() if upload.finished_at else None,
    }


class UploadDetailView(ConsoleAPIView):
    """`GET uploads/{id}`: how far the processing of an uploaded file got, with its bad lines."""

    queryset = Upload.objects.select_related("tenant")
    filter_backends: list[Any] = []

    @extend_schema(operation_id="uploads_read", responses={200: OpenApiResponse({"type": "object"}), 404: ERRORS})
    def get(self, request: Request, pk: int) -> Response:
        return Response(upload_as_dict(get_object_or_404(self.get_queryset(), pk=pk)))
