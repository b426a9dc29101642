"""Every /api/ URL answers JSON errors: no route, no CSRF token, a bug, a lost database."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import OperationalError
from django.test import Client

from traces.ingest import api as trace_views

ERROR = {"errors": [{"path": "", "message": "not found"}]}


@pytest.mark.parametrize("method", ["get", "post", "put", "patch", "delete"])
@pytest.mark.parametrize("url", ["/api/v1/nothing", "/api/v1/checks/x/nothing", "/api/nothing"])
def test_an_unknown_api_url_is_a_json_404_for_every_method(alice: Any, method: str, url: str) -> None:
    client = Client(enforce_csrf_checks=True)  # a session without a CSRF token
    client.force_login(alice)
    if method == "get":
        response = client.get(url)
    else:
        response = getattr(client, method)(url, data="{}", content_type="application/json")
    assert response.status_code == 404
    assert response["Content-Type"] == "application/json" and response.json() == ERROR


def failing(exc: Exception) -> Any:
    def get(*args: Any, **kwargs: Any) -> Any:
        raise exc

    return get


def test_a_bug_is_a_500_in_the_error_shape(api: Any, acme_key: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(trace_views.TraceListView, "get", failing(RuntimeError("a bug")))
    client = api(acme_key)
    client.raise_request_exception = False
    response = client.get("/api/v1/traces")
    assert response.status_code == 500
    assert response.json() == {"errors": [{"path": "", "message": "internal error"}]}


def test_a_lost_database_is_a_503_with_retry_after(api: Any, acme_key: str, monkeypatch: pytest.MonkeyPatch) -> None:
    lost = OperationalError("server closed the connection unexpectedly")
    monkeypatch.setattr(trace_views.TraceListView, "get", failing(lost))
    client = api(acme_key)
    client.raise_request_exception = False
    response = client.get("/api/v1/traces")
    assert response.status_code == 503 and response["Retry-After"] == "5"
    assert response.json()["errors"][0]["message"].startswith("the database is unavailable")


def test_a_request_refused_before_the_view_is_a_json_400(db: Any) -> None:
    """An empty Host header (Django refuses it before any view: handler400)."""
    response = Client().get("/api/v1/checks", HTTP_HOST="")
    assert response.status_code == 400
    assert response.json() == {"errors": [{"path": "", "message": "bad request"}]}
    assert Client().get("/guardrails/", HTTP_HOST="")["Content-Type"].startswith("text/html")


def test_a_database_lost_outside_the_view_is_a_json_503(db: Any, settings: Any) -> None:
    """The error handler (handler500) answers for errors before the view, e.g. in a
    middleware that reads the session."""
    from kindgi_console.errors import server_error

    request = Client().get("/api/v1/nothing").wsgi_request
    try:
        raise OperationalError("connection refused")
    except OperationalError:
        response = server_error(request)
    assert response.status_code == 503 and response["Retry-After"] == "5"


@pytest.mark.parametrize("body", [b'{"id": "a", "id": "b"}', b'{"traces": [{"id": "x", "id": "y"}]}'])
def test_a_duplicate_key_in_a_body_is_a_400(api: Any, acme_key: str, body: bytes) -> None:
    response = api(acme_key).post("/api/v1/traces", data=body, content_type="application/json")
    assert response.status_code == 400
    assert "appears twice" in response.json()["errors"][0]["message"]


def test_a_very_deep_body_is_a_400(api: Any, alice: Any) -> None:
    body = b"[" * 100_000 + b"]" * 100_000
    response = api(alice).post("/api/v1/guardrails/validate", data=body, content_type="application/json")
    assert response.status_code == 400


@pytest.mark.parametrize(
    ("url", "body"),
    [
        ("/api/v1/guardrails/preview/estimate", {"tenant": "ac\u0000me", "guardrail": {}}),
        ("/api/v1/guardrails/preview", {"tenant": "ac\u0000me", "guardrail": {}}),
        ("/api/v1/evaluations", {"tenant": "ac\u0000me", "guardrails": []}),
        ("/api/v1/traces", {"id": "t-nul", "tenant": "ac\u0000me", "input": "hi", "output": "hello"}),
    ],
)
def test_a_nul_in_a_tenant_named_in_a_body_is_a_400_not_a_lookup(api: Any, alice: Any, url: str, body: Any) -> None:
    """PostgreSQL cannot hold the character: a look-up with it would fail with a 500 (found
    by schemathesis). A signed-in author's write names its tenant, so each is looked up."""
    from traces.models import Evaluation, RunTrace

    response = api(alice).post(url, data=body, format="json")
    assert response.status_code == 400, response.content
    assert response.json()["errors"][0]["path"] == "/tenant"
    assert not RunTrace.objects.exists() and not Evaluation.objects.exists()
