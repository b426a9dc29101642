"""The trace pages: the list and its filters, the timeline, scoping and trace content as text."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from kindgi_console.tenancy.models import Tenant
from tests.conftest import signed_in
from tests.traces import seed
from traces.models import RunTrace
from traces.store.timeline import http_url


def test_alice_lists_acmes_traces_newest_first(alice: Any, acme: Tenant, halt_guardrail: Any) -> None:
    seed.traces(acme, 3)
    page = signed_in(alice).get("/traces/")
    assert page.status_code == 200
    body = page.content.decode()
    assert body.index("run-acme-0000") < body.index("run-acme-0001") < body.index("run-acme-0002")
    assert "Can I get a refund for order 1234?" in body


def test_bob_the_reviewer_reads_traces_too(bob: Any, acme: Tenant, halt_guardrail: Any) -> None:
    trace = seed.traces(acme, 1)[0]
    assert signed_in(bob).get("/traces/").status_code == 200
    assert signed_in(bob).get(f"/traces/{trace.pk}/").status_code == 200


def test_charlie_gets_no_acme_trace(charlie: Any, acme: Tenant, halt_guardrail: Any) -> None:
    trace = seed.traces(acme, 2)[0]
    client = signed_in(charlie)
    assert "run-acme" not in client.get("/traces/").content.decode()
    assert client.get(f"/traces/{trace.pk}/").status_code == 404


def test_a_visitor_is_sent_to_sign_in(acme: Tenant) -> None:
    response = Client().get("/traces/")
    assert response.status_code == 302 and response["Location"].startswith("/login/")


def test_the_filters_narrow_the_list(alice: Any, acme: Tenant, halt_guardrail: Any) -> None:
    seed.traces(acme, 2, prefix="bill", agent="billing-bot", flow="invoice")
    seed.traces(acme, 2, prefix="clean", toolCalls=[])  # no issue_refund: no violation
    client = signed_in(alice)

    def listed(query: str) -> set[str]:
        html = client.get("/traces/?" + query).content.decode()
        return {t for t in RunTrace.objects.values_list("trace_id", flat=True) if t in html}

    assert listed("agent=billing-bot") == {"bill-acme-0000", "bill-acme-0001"}
    assert listed("flow=invoice") == {"bill-acme-0000", "bill-acme-0001"}
    assert listed("violations=no") == {"clean-acme-0000", "clean-acme-0001"}
    assert listed("violations=yes") == {"bill-acme-0000", "bill-acme-0001"}
    # A stored trace that a halt guardrail fails loses its response (withheld).
    assert listed("withheld=yes") == {"bill-acme-0000", "bill-acme-0001"}
    RunTrace.objects.filter(trace_id="bill-acme-0000").update(withheld=False)
    assert listed("withheld=yes") == {"bill-acme-0001"}
    assert listed("withheld=no") == {"bill-acme-0000", "clean-acme-0000", "clean-acme-0001"}
    assert len(listed("since=2000-01-01&until=2999-01-01")) == 4
    assert listed("until=2000-01-01") == set()
    assert client.get("/traces/?since=not-a-date").status_code == 200  # shown at the field


def test_the_cursor_walks_every_trace_once(alice: Any, acme: Tenant) -> None:
    seed.traces(acme, 60)
    client = signed_in(alice)
    seen: list[str] = []
    url = "/traces/?size=25"
    while url:
        response = client.get(url)
        page = response.context["page"]
        seen.extend(trace.trace_id for trace in page.rows)
        url = page.next_url
    assert sorted(seen) == sorted(RunTrace.objects.values_list("trace_id", flat=True))
    assert len(seen) == 60
    # and back: the previous link of the second page gives the first page again
    first = client.get("/traces/?size=25").context["page"]
    second = client.get(first.next_url).context["page"]
    again = client.get(second.previous_url).context["page"]
    assert [t.pk for t in again.rows] == [t.pk for t in first.rows]


@pytest.mark.parametrize("url", ["/traces/?size={size}", "/traces/?size={size}&violations=yes"])
def test_the_list_costs_the_same_queries_at_any_page_size(
    alice: Any, acme: Tenant, halt_guardrail: Any, url: str
) -> None:
    seed.traces(acme, 120)
    client = signed_in(alice)
    counts = []
    for size in (25, 100):
        with CaptureQueriesContext(connection) as queries:
            response = client.get(url.format(size=size))
        assert len(response.context["traces"]) == size
        counts.append(len(queries))
    assert counts[0] == counts[1]


def test_the_trace_page_shows_the_turn_results_and_violations(alice: Any, acme: Tenant, halt_guardrail: Any) -> None:
    trace = seed.traces(
        acme,
        1,
        citations=[{"source": "policy-refunds", "title": "Refunds", "quote": "within 30 days"}],
        metadata={"region": "eu"},
    )[0]
    body = signed_in(alice).get(f"/traces/{trace.pk}/").content.decode()
    for text in (
        "lookup_order",
        "issue_refund",
        "&quot;order&quot;: &quot;1234&quot;",
        "&quot;status&quot;: &quot;delivered&quot;",
        "policy-refunds",
        "within 30 days",
        "no-refunds",
        "pill--fail",
        "&quot;region&quot;: &quot;eu&quot;",
        "812 in",
    ):
        assert text in body, text


def test_a_withheld_response_is_marked(alice: Any, acme: Tenant, halt_guardrail: Any) -> None:
    trace = seed.traces(acme, 1)[0]
    RunTrace.objects.filter(pk=trace.pk).update(withheld=True)
    body = signed_in(alice).get(f"/traces/{trace.pk}/").content.decode()
    assert "Response withheld" in body and "withheld: not delivered" in body


def test_the_trace_page_costs_a_fixed_number_of_queries(alice: Any, acme: Tenant, halt_guardrail: Any) -> None:
    trace = seed.traces(acme, 1)[0]
    client = signed_in(alice)
    with CaptureQueriesContext(connection) as queries:
        assert client.get(f"/traces/{trace.pk}/").status_code == 200
    assert len(queries) <= 12


HOSTILE: dict[str, Any] = {
    "output": "<script>alert('x')</script> <img src=x onerror=alert(1)>",
    "messages": [
        {"role": "user", "content": "<b>hi</b>"},
        {"role": "assistant", "content": "<script>alert('x')</script>"},
    ],
    "toolCalls": [
        {
            "id": "c1",
            "name": "<i>tool</i>",
            "arguments": {"q": "<script>"},
            "result": "<img src=x onerror=alert(2)>",
            "error": "<svg onload=alert(3)>",
        }
    ],
    "citations": [
        {"source": "javascript:alert(1)", "title": "<script>t</script>"},
        {"source": "https://example.org/a?b=1&c=<x>", "title": "ok"},
        {"source": "java\tscript:alert(1)"},
    ],
    "metadata": {"note": "</pre><script>alert(4)</script>"},
}


def test_trace_content_is_text_and_only_http_links_are_links(alice: Any, acme: Tenant) -> None:
    trace = seed.traces(acme, 1, **HOSTILE)[0]
    body = signed_in(alice).get(f"/traces/{trace.pk}/").content.decode()
    assert "<script>alert" not in body and "<img src=x" not in body and "<svg" not in body
    assert "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt;" in body
    assert "&lt;img src=x onerror=alert(1)&gt;" in body
    assert 'href="javascript' not in body and 'href="java' not in body
    assert ('<a href="https://example.org/a?b=1&amp;c=&lt;x&gt;" rel="noopener noreferrer nofollow"') in body


@pytest.mark.parametrize(
    ("source", "link"),
    [
        ("https://example.org/x", True),
        ("http://example.org", True),
        ("HTTPS://example.org", True),
        ("javascript:alert(1)", False),
        ("JavaScript:alert(1)", False),
        ("java\nscript:x", False),
        (" https://example.org", False),
        ("data:text/html,x", False),
        ("policy-refunds", False),
        ("//example.org/x", False),
        ("https:///nohost", False),
        (None, False),
    ],
)
def test_only_absolute_http_urls_become_links(source: Any, link: bool) -> None:
    assert (http_url(source) is not None) is link
