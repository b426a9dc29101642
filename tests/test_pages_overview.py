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
    # One of them reads the ids of the tenants alice may read, four the open counts of the
    # contract's severities (each up to the cap), one a probe per severity name there is and
    # one more, one the first review queue's name (a queue adds three: its two counts and
    # the next name).
    assert len(queries) <= 20


def test_past_the_count_cap_the_figures_say_how_many_at_least(
    client: Any, api: Any, alice: Any, acme_key: str, halt_guardrail: Any, settings: Any
) -> None:
    """Each figure is counted up to KINDGI_PAGE_COUNT_CAP: "2+" past it, the total too."""
    violate(api, acme_key, "r-1", "r-2", "r-3")
    settings.KINDGI_PAGE_COUNT_CAP = 2
    client.force_login(alice)
    response = client.get("/")
    critical = next(item["count"] for item in response.context["severities"] if item["name"] == "critical")
    assert (str(critical), str(response.context["open_total"]), str(response.context["traces_24h"])) == ("2+",) * 3
    assert response.context["unrated"] == 0
    assert '<div class="stat__value">2+</div>' in response.content.decode()
    settings.KINDGI_PAGE_COUNT_CAP = 3
    exact = client.get("/")
    assert exact.context["open_total"] == 3 and str(exact.context["open_total"]) == "3"


def test_the_counts_read_no_more_rows_than_the_cap(
    client: Any, api: Any, alice: Any, acme_key: str, halt_guardrail: Any, settings: Any
) -> None:
    """Every count of the page is a count of at most cap + 1 rows (a LIMIT under it)."""
    violate(api, acme_key, "r-1")
    settings.KINDGI_PAGE_COUNT_CAP = 7
    client.force_login(alice)
    with CaptureQueriesContext(connection) as queries:
        assert client.get("/").status_code == 200
    counts = [q["sql"] for q in queries.captured_queries if "COUNT(" in q["sql"].upper() and "traces_" in q["sql"]]
    assert counts and all("LIMIT 8" in sql for sql in counts), counts


def test_past_the_severities_it_reads_the_unrated_figure_says_at_least(
    client: Any, api: Any, alice: Any, acme_key: str, halt_guardrail: Any, monkeypatch: Any
) -> None:
    """Names other than the contract's four are found one index probe at a time, up to
    MAX_SEVERITIES: stopped there, the unrated figure is "N+", never a figure it did not
    count; the four are counted whatever the other names."""
    from kindgi_console import overview
    from traces.models import Violation

    violate(api, acme_key, "r-1", "r-2", "r-3")
    Violation.objects.filter(trace__trace_id="r-1").update(severity="")
    Violation.objects.filter(trace__trace_id="r-2").update(severity="custom")
    client.force_login(alice)
    exact = client.get("/")
    assert exact.context["unrated"] == 2 and exact.context["open_total"] == 3
    monkeypatch.setattr(overview, "MAX_SEVERITIES", 1)
    response = client.get("/")
    counts = {item["name"]: item["count"] for item in response.context["severities"]}
    assert counts == {"critical": 1, "error": 0, "warn": 0, "info": 0}
    assert str(response.context["unrated"]) == "1+" and str(response.context["open_total"]) == "2+"
