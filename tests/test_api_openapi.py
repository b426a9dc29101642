"""The OpenAPI description matches what the endpoints do, checked with schemathesis.

Schemathesis generates requests from /api/schema/ and checks every response against it
(status codes, content types, bodies, headers). The requests run through the WSGI app in
the test's database, as a runtime's key for acme, over data that acme has written.
"""

from __future__ import annotations

from typing import Any

import orjson
import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.specs.openapi.checks import positive_data_acceptance

from tests.conftest import make_guardrail, make_trace

EXAMPLES = settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))


@pytest.fixture
def acme_data(acme_written: str) -> Any:
    """The WSGI app closes "old" connections around each request, which would end the
    test's transaction on PostgreSQL; Django's own test client does the same as this."""
    from django.core.signals import request_finished, request_started
    from django.db import close_old_connections

    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    yield acme_written
    request_started.connect(close_old_connections)
    request_finished.connect(close_old_connections)


@pytest.fixture
def acme_written(db: Any, acme_key: str, halt_guardrail: Any) -> str:
    """acme's runtime key, after acme wrote traces that a guardrail judged."""
    _write_some_traces(acme_key)
    return acme_key


def _write_some_traces(key: str) -> None:
    from rest_framework.test import APIClient

    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {key}")
    body = {"traces": [make_trace(f"run-{n}") for n in range(3)]}
    client.post("/api/v1/traces", data=orjson.dumps(body), content_type="application/json")
    client.post("/api/v1/evaluate", data=make_trace("verdict"), format="json")
    assert make_guardrail()["id"] == "no-refunds"


def _load_schema() -> Any:
    from kindgi_console.wsgi import application

    return schemathesis.openapi.from_wsgi("/api/schema/?format=json", application)


schema = _load_schema()


@schema.include(method="GET").parametrize()
@EXAMPLES
def test_the_read_endpoints_answer_as_described(case: Any, acme_data: str) -> None:
    # A cursor is opaque: any string is schema-valid, but only the API's own are accepted
    # (tests/traces/test_api_read.py walks real ones).
    if case.query:
        case.query.pop("cursor", None)
    case.call_and_validate(headers={"Authorization": f"Bearer {acme_data}"})


@schema.include(method="POST", path_regex="^/api/v1/(traces|evaluate|guardrails/validate)$").parametrize()
@EXAMPLES
def test_ingestion_and_verdicts_answer_as_described(case: Any, acme_data: str) -> None:
    # Schema-valid traces may still be refused, for rules JSON Schema cannot state
    # (`endedAt` before `startedAt`, another tenant's id: 400 and 403 with the field named);
    # every other check applies, negative data rejection included.
    case.call_and_validate(headers={"Authorization": f"Bearer {acme_data}"}, excluded_checks=[positive_data_acceptance])


@pytest.fixture
def every_scope(acme_data: str, acme: Any) -> list[str]:
    """Keys with every scope for acme, with read only, and for the whole console."""
    from kindgi_console.tenancy.models import SCOPES, ApiKey

    return [
        ApiKey.issue(scopes=list(SCOPES), tenant=acme, name="all")[1],
        ApiKey.issue(scopes=["read"], tenant=acme, name="read")[1],
        ApiKey.issue(scopes=["author", "read"], name="console")[1],
    ]


@schema.parametrize()
@settings(max_examples=15, deadline=None, suppress_health_check=list(HealthCheck))
def test_every_endpoint_answers_as_described_for_every_scope(case: Any, every_scope: list[str]) -> None:
    """No 5xx and no answer the description does not allow, whatever the method and the
    caller's scopes. Schema-valid requests may still be refused for rules JSON Schema
    cannot state (an id of no guardrail, a run over no trace): positive data acceptance
    is left out, every other check applies."""
    if case.query:
        case.query.pop("cursor", None)
    for key in every_scope:
        case.call_and_validate(headers={"Authorization": f"Bearer {key}"}, excluded_checks=[positive_data_acceptance])
