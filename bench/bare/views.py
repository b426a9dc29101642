"""The bare view: parse the body, insert one row, answer its id."""

from __future__ import annotations

import json

from django.db import connection
from django.http import HttpRequest, JsonResponse
from django.views.decorators.csrf import csrf_exempt

TABLE = "bench_bare_trace"
CREATE = f"CREATE TABLE IF NOT EXISTS {TABLE} (id bigserial PRIMARY KEY, trace_id text NOT NULL, document jsonb)"
INSERT = f"INSERT INTO {TABLE} (trace_id, document) VALUES (%s, %s::jsonb) RETURNING id"


@csrf_exempt
def store(request: HttpRequest) -> JsonResponse:
    """The body as a JSON object, stored as one row (its id and the document)."""
    document = json.loads(request.body)
    with connection.cursor() as cursor:
        cursor.execute(INSERT, [document["id"], request.body.decode()])
        (row,) = cursor.fetchone()
    return JsonResponse({"id": row, "trace": document["id"]})
