"""How good a guardrail is: precision from reviews with its Wilson interval, review coverage,
per revision and period; the guardrail page's section, the list's sort, and tenants apart."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from guardrails.engine.statistics import wilson
from guardrails.services import Author, save_guardrail
from kindgi_console.tenancy.scoping import Caller
from tests.conftest import make_guardrail, signed_in
from tests.traces.test_evaluations import run_for, store_traces
from traces.models import RunTrace, Violation, ViolationDay
from traces.review import workflow as reviewing
from traces.review.quality import midnight, quality_of, rolled_up_quality
from traces.store import retention, violation_days

URL = "/api/v1/guardrails/no-refunds/quality"


def review(api: Any, who: Any, violation: Violation, state: str) -> None:
    answer = api(who).post(f"/api/v1/violations/{violation.pk}/review", {"state": state}, format="json")
    assert answer.status_code == 200, answer.json()


@pytest.fixture
def reviewed(api: Any, bob: Any, acme: Any, halt_guardrail: Any) -> list[Violation]:
    """Six violations over two revisions: two false positives, two confirmed, two open."""
    store_traces(acme, 9)
    run_for(acme)
    save_guardrail(make_guardrail(config={"tools": ["issue_refund", "lookup_order"]}), Author(user=None, label="t"))
    store_traces(acme, 0)
    run_for(acme, guardrails=["no-refunds"], filters={"agent": "support-bot"})
    violations = list(Violation.objects.order_by("pk"))
    first = [v for v in violations if v.revision.number == 1]
    second = [v for v in violations if v.revision.number == 2]
    review(api, bob, first[0], "false-positive")
    review(api, bob, first[1], "acknowledged")
    review(api, bob, second[0], "false-positive")
    review(api, bob, second[1], "resolved")
    return violations


def test_the_wilson_interval_matches_the_textbook() -> None:
    low, high = wilson(8, 10)  # type: ignore[misc]
    assert (round(low, 3), round(high, 3)) == (0.49, 0.943)
    assert wilson(0, 0) is None
    assert wilson(5, 5)[1] == 1.0  # type: ignore[index]


def test_quality_counts_reviews_per_revision(api: Any, acme_key: str, reviewed: list[Violation]) -> None:
    body = api(acme_key).get(URL).json()
    assert (body["violations"], body["reviewed"], body["falsePositives"]) == (len(reviewed), 4, 2)
    assert body["precision"] == 0.5 and body["coverage"] == round(4 / len(reviewed), 4)
    low, high = body["precisionInterval"]
    assert 0 < low < 0.5 < high < 1
    revisions = {row["revision"]: row for row in body["revisions"]}
    assert sorted(revisions) == [1, 2]
    assert (revisions[1]["reviewed"], revisions[1]["falsePositives"], revisions[1]["precision"]) == (2, 1, 0.5)


def test_a_false_positive_moves_the_precision(api: Any, bob: Any, acme_key: str, reviewed: list[Violation]) -> None:
    before = api(acme_key).get(URL).json()["precision"]
    still_open = next(v for v in Violation.objects.filter(state="open"))
    review(api, bob, still_open, "false-positive")
    after = api(acme_key).get(URL).json()
    assert after["precision"] < before and after["falsePositives"] == 3


def test_quality_is_over_the_chosen_period(api: Any, acme_key: str, reviewed: list[Violation]) -> None:
    violation_days.redate(Violation.objects.filter(pk=reviewed[0].pk), timezone.now() - timedelta(days=60))
    since = (timezone.now() - timedelta(days=30)).isoformat().replace("+00:00", "Z")
    body = api(acme_key).get(URL, {"since": since}).json()
    assert body["violations"] == len(reviewed) - 1
    assert api(acme_key).get(URL, {"since": "yesterday"}).json()["errors"][0]["path"] == "/since"


def test_another_tenant_sees_none_of_acmes_reviews(
    api: Any, charlie: Any, charlie_key: str, reviewed: list[Violation]
) -> None:
    for outsider in (api(charlie), api(charlie_key)):
        body = outsider.get(URL).json()
        assert (body["violations"], body["reviewed"], body["revisions"]) == (0, 0, [])
        assert outsider.get(f"{URL}?tenant=acme").json()["violations"] == 0
    html = signed_in(charlie).get("/guardrails/no-refunds/").content.decode()
    assert "no review yet" in html
    assert api(charlie).get("/api/v1/guardrails/ghost/quality").status_code == 404


def test_the_guardrail_page_shows_quality_and_the_list_sorts_by_it(
    bob: Any, reviewed: list[Violation], acme: Any
) -> None:
    save_guardrail(make_guardrail("cite", check="must-cite", config={"min": 1}), Author(user=None, label="t"))
    client = signed_in(bob)
    html = client.get("/guardrails/no-refunds/").content.decode()
    assert "Quality" in html and "50%" in html and "Revision 2" in html
    listing = client.get("/guardrails/?sort=precision").content.decode()
    assert "Precision" in listing and listing.index("no-refunds") < listing.index(">cite<")


def both_ways(since: Any = None, until: Any = None) -> tuple[Any, Any]:
    """The quality of no-refunds in acme from the roll-up and from counting the violations."""
    violations = Violation.objects.filter(guardrail__guardrail_id="no-refunds", tenant__slug="acme")
    days = ViolationDay.objects.filter(guardrail__guardrail_id="no-refunds", tenant__slug="acme")
    rolled = rolled_up_quality(days, violations, since, until)
    counted = quality_of(
        violations.filter(
            **({"created_at__gte": since} if since else {}), **({"created_at__lt": until} if until else {})
        )
    )
    return rolled, counted


def periods() -> list[tuple[Any, Any]]:
    now = timezone.now()
    today = midnight(timezone.localdate())
    return [
        (None, None),
        (now - timedelta(days=30), None),
        (None, now),
        (today, None),
        (today + timedelta(hours=1), today + timedelta(hours=23)),
        (now - timedelta(days=3), now - timedelta(days=1)),
        (now - timedelta(days=61), now + timedelta(minutes=1)),
    ]


def assert_same_figures() -> None:
    for since, until in periods():
        rolled, counted = both_ways(since, until)
        assert rolled == counted, (since, until)


def test_the_roll_up_gives_the_counted_figures_after_writes_reviews_and_deletes(
    bob: Any, acme: Any, reviewed: list[Violation]
) -> None:
    assert_same_figures()
    caller = Caller(user=bob)
    moves = [
        ("false-positive", "open"),
        ("open", "acknowledged"),
        ("acknowledged", "false-positive"),
        ("false-positive", "open"),
        ("open", "resolved"),
        ("resolved", "open"),
    ]
    for old, new in moves:  # back and forth, one violation and several at once
        selection = reviewing.reviewable(caller).filter(state=old)
        reviewing.review(selection, new, "", caller)
        assert_same_figures()
    violation_days.redate(
        Violation.objects.filter(pk__in=[v.pk for v in reviewed[:3]]), timezone.now() - timedelta(days=2, hours=5)
    )
    assert_same_figures()
    reviewing.review(reviewing.reviewable(caller).filter(pk=reviewed[0].pk), "false-positive", "", caller)
    RunTrace.objects.filter(pk=reviewed[1].trace_id).delete()  # a trace deleted with its violations
    assert_same_figures()
    RunTrace.objects.filter(pk=reviewed[2].trace_id).update(received_at=timezone.now() - timedelta(days=90))
    retention.delete_old_traces(acme.pk, timezone.now() - timedelta(days=30))
    assert_same_figures()
    assert both_ways()[0][0].violations == Violation.objects.filter(guardrail__guardrail_id="no-refunds").count()


def test_the_backfill_counts_the_stored_violations_and_reviews(reviewed: list[Violation]) -> None:
    import importlib
    from types import SimpleNamespace

    from django.apps import apps
    from django.db import connection

    migration = importlib.import_module("traces.migrations.0016_violation_days_count_reviews")
    kept = sorted(
        ViolationDay.objects.values_list(
            "guardrail", "revision", "severity", "day", "count", "reviewed", "false_positives"
        )
    )
    assert any(row[5] for row in kept) and any(row[6] for row in kept)
    ViolationDay.objects.all().delete()
    migration.count_violations_and_reviews(apps, SimpleNamespace(connection=connection))
    assert (
        sorted(
            ViolationDay.objects.values_list(
                "guardrail", "revision", "severity", "day", "count", "reviewed", "false_positives"
            )
        )
        == kept
    )


def test_quality_costs_the_same_queries_whatever_the_violations(
    api: Any, bob: Any, acme: Any, acme_key: str, reviewed: list[Violation]
) -> None:
    from django.db import connection
    from django.db.models import Value
    from django.db.models.functions import Concat
    from django.test.utils import CaptureQueriesContext

    def queries(client: Any, url: str) -> int:
        client.get(url)  # the key's and the cache's first look-ups
        with CaptureQueriesContext(connection) as captured:
            assert client.get(url).status_code == 200
        return len(captured)

    def all_three() -> tuple[int, int, int]:
        since = (timezone.now() - timedelta(hours=30)).isoformat().replace("+00:00", "Z")
        return (
            queries(api(acme_key), URL),
            queries(api(acme_key), f"{URL}?since={since}"),
            queries(signed_in(bob), "/guardrails/no-refunds/"),
        )

    before = all_three()
    RunTrace.objects.update(trace_id=Concat(Value("old-"), "trace_id"))
    store_traces(acme, 60)
    run_for(acme)
    assert Violation.objects.count() > 3 * len(reviewed)
    assert all_three() == before
