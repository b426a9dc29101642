"""The overview page: the current tenant at a glance."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from tests.conftest import make_trace


def violate(api: Any, key: str, *trace_ids: str) -> None:
    for trace_id in trace_ids:
        assert api(key).post("/api/v1/evaluate", data=make_trace(trace_id), format="json").status_code == 200


def test_it_counts_open_violations_by_severity_and_the_days_traces(
    client: Any, api: Any, alice: Any, acme_key: str, halt_guardrail: Any
) -> None:
    violate(api, acme_key, "r-1", "r-2")
    client.force_login(alice)
    response = client.get("/")
    assert response.status_code == 200
    counts = {item["name"]: item["count"] for item in response.context["severities"]}
    assert counts == {"critical": 2, "error": 0, "warn": 0, "info": 0}
    assert response.context["open_total"] == 2
    assert response.context["traces_24h"] == 2
    assert response.context["guardrails_enabled"] == 1
    assert len(response.context["recent_violations"]) == 2
    assert b'href="/guardrails/no-refunds/"' in response.content


def test_charlie_sees_nothing_of_acme(client: Any, api: Any, charlie: Any, acme_key: str, halt_guardrail: Any) -> None:
    violate(api, acme_key, "r-1")
    client.force_login(charlie)
    response = client.get("/")
    assert response.context["open_total"] == 0 and response.context["traces_24h"] == 0
    assert response.context["recent_violations"] == [] and b"r-1" not in response.content


def test_a_visitor_is_sent_to_sign_in(client: Any, db: Any) -> None:
    assert client.get("/")["Location"].startswith("/login/")


@pytest.mark.parametrize("size", [1, 12])
def test_it_takes_a_fixed_number_of_queries(
    client: Any, api: Any, alice: Any, acme_key: str, halt_guardrail: Any, size: int
) -> None:
    violate(api, acme_key, *[f"r-{n}" for n in range(size)])
    client.force_login(alice)
    with CaptureQueriesContext(connection) as queries:
        assert client.get("/").status_code == 200
    # One of them reads the ids of the tenants alice may read, one the open count per review queue.
    assert len(queries) <= 14
