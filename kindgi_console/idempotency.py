"""`Idempotency-Key` on the API's POST endpoints that start work.

A client that retries (a timeout, a 5xx after the work had started) sends the same key:
the same key and body from the same caller answer what the first request answered, and
start nothing again; the same key with another body is a 422. The key's row is inserted
in the transaction of the work, so on PostgreSQL a concurrent duplicate waits for the
first and then replays its answer; a request that failed rolls its row back with its work.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from django.db import IntegrityError, transaction
from django.http import HttpResponse
from django.utils import timezone
from drf_spectacular.utils import OpenApiParameter
from rest_framework.renderers import JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response

from guardrails.engine.types import Issue
from kindgi_console.api import ApiError, caller_of
from kindgi_console.tenancy.models import IdempotencyRecord

HEADER = "Idempotency-Key"
MAX_KEY_LENGTH = 255
#: How long a key is remembered.
KEPT_FOR = timedelta(hours=24)

View = Callable[..., Any]


def idempotent(method: View) -> View:
    """Decorate a DRF view's `post`: honour the request's Idempotency-Key, if it has one."""

    @functools.wraps(method)
    def wrapper(view: Any, request: Request, *args: Any, **kwargs: Any) -> Any:
        key = request.headers.get(HEADER)
        if key is None:
            return method(view, request, *args, **kwargs)
        check_key(key)
        owner, fingerprint = owner_of(request), fingerprint_of(request)
        with transaction.atomic():
            record, replay = claim(owner, key, fingerprint)
            if replay is not None:
                return replay
            response = method(view, request, *args, **kwargs)
            remember(record, response)
        return response

    return wrapper


def check_key(key: str) -> None:
    if not key or len(key) > MAX_KEY_LENGTH or not key.isprintable() or not key.isascii():
        raise ApiError(
            [Issue(f"/{HEADER}", f"the {HEADER} header is 1 to {MAX_KEY_LENGTH} printable ASCII characters")]
        )


def owner_of(request: Request) -> str:
    caller = caller_of(request)
    return f"key:{caller.key.pk}" if caller.key is not None else f"user:{caller.user.pk}"


def fingerprint_of(request: Request) -> str:
    digest = hashlib.sha256(f"{request.method} {request.path}\n".encode())
    digest.update(request._request.body)
    return digest.hexdigest()


def claim(owner: str, key: str, fingerprint: str) -> tuple[IdempotencyRecord, HttpResponse | None]:
    """The key's row, new (None: do the work) or earlier (its answer, to replay)."""
    expired = IdempotencyRecord.objects.filter(created_at__lt=timezone.now() - KEPT_FOR)
    expired.filter(owner=owner, key=key).delete()
    try:
        with transaction.atomic():
            return IdempotencyRecord.objects.create(owner=owner, key=key, fingerprint=fingerprint), None
    except IntegrityError:  # sent before (a concurrent first has committed by now)
        earlier = IdempotencyRecord.objects.get(owner=owner, key=key)
    if earlier.fingerprint != fingerprint:
        raise ApiError(
            [Issue(f"/{HEADER}", f"this {HEADER} was used with another request: use a new key for a new request")], 422
        )
    response = HttpResponse(earlier.content, status=earlier.status_code, content_type="application/json")
    response["Idempotent-Replayed"] = "true"
    return earlier, response


def remember(record: IdempotencyRecord, response: Any) -> None:
    if isinstance(response, Response):
        record.content = JSONRenderer().render(response.data).decode()
    else:
        record.content = response.content.decode()
    record.status_code = response.status_code
    record.save(update_fields=["content", "status_code"])


#: The header in the OpenAPI description of an idempotent endpoint.
PARAMETER = OpenApiParameter(
    HEADER,
    str,
    location=OpenApiParameter.HEADER,
    required=False,
    description="Retry safely: the same key and body answer the first answer again and "
    f"start nothing twice (for {int(KEPT_FOR.total_seconds() // 3600)} hours); the same key "
    f"with another body is a 422. 1 to {MAX_KEY_LENGTH} printable ASCII characters.",
)
