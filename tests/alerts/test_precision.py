"""The `precision` rule: a guardrail's precision from reviews (as its quality card computes
it) fell under a threshold. It waits for `minReviewed` reviews, fires once per episode,
resolves when the precision recovers, and is evaluated by a review itself (the write path)
as well as by the periodic check. charlie (globex) neither reads acme's rules nor points
one of his at acme's guardrail, and acme's reviews never move globex's rule."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from alerts.firing import evaluate_rules
from alerts.models import AlertRule, Channel, Delivery, Firing
from alerts.services import save_channel, save_rule
from guardrails.services import Author, save_guardrail
from tests.conftest import make_guardrail, signed_in
from tests.traces import seed
from traces.models import Violation

pytestmark = pytest.mark.django_db

PARAMS = {"guardrail": "no-refunds", "threshold": 0.8, "minReviewed": 3, "windowDays": 7}
RULE = {"tenant": "acme", "name": "refund precision", "kind": "precision", "params": PARAMS}


def review(client: Any, violation: Violation, state: str) -> None:
    answer = client.post(f"/api/v1/violations/{violation.pk}/review", {"state": state}, format="json")
    assert answer.status_code == 200, answer.json()


@pytest.fixture
def acme_violations(acme: Any, acme_guardrail: Any) -> list[Violation]:
    """Six violations of acme's no-refunds, none reviewed yet."""
    seed.traces(acme, 6)
    found = seed.violations(acme)
    assert len(found) == 6
    return found


@pytest.fixture
def precision_rule(acme: Any, acme_guardrail: Any) -> AlertRule:
    channel = save_channel(acme, {"name": "mail", "kind": "email", "emails": ["ops@example.org"]}, "fixture")
    return save_rule(
        acme, {"name": "refund precision", "kind": "precision", "params": PARAMS, "channels": [channel]}, "fixture"
    )


def test_an_author_creates_a_precision_rule_through_the_api(alice: Any, acme_guardrail: Any, api: Any) -> None:
    answer = api(alice).post("/api/v1/alert-rules", RULE, format="json")
    assert answer.status_code == 201, answer.json()
    assert answer.json()["kind"] == "precision" and answer.json()["params"] == PARAMS


@pytest.mark.parametrize(
    ("params", "path"),
    [
        ({"threshold": 0.8}, "/params/guardrail"),
        ({"guardrail": "no-refunds"}, "/params/threshold"),
        ({**PARAMS, "threshold": 1.5}, "/params/threshold"),
        ({**PARAMS, "threshold": 0}, "/params/threshold"),
        ({**PARAMS, "threshold": "high"}, "/params/threshold"),
        ({**PARAMS, "minReviewed": 0}, "/params/minReviewed"),
        ({**PARAMS, "windowDays": 0}, "/params/windowDays"),
        ({**PARAMS, "guardrail": "no-such-guardrail"}, "/params/guardrail"),
        ({**PARAMS, "factor": 2}, "/params"),
    ],
)
def test_an_invalid_precision_rule_is_a_400_naming_the_field(
    alice: Any, acme_guardrail: Any, api: Any, params: Any, path: str
) -> None:
    answer = api(alice).post("/api/v1/alert-rules", {**RULE, "params": params}, format="json")
    assert answer.status_code == 400, answer.json()
    assert path in [error["path"] for error in answer.json()["errors"]]
    assert not AlertRule.objects.exists()


def test_one_false_positive_does_not_fire_before_the_minimum_of_reviews(
    bob: Any,
    api: Any,
    acme_violations: list[Violation],
    precision_rule: AlertRule,
    django_capture_on_commit_callbacks: Any,
) -> None:
    with django_capture_on_commit_callbacks(execute=True):
        review(api(bob), acme_violations[0], "false-positive")
    assert not Firing.objects.exists()
    assert evaluate_rules() == {"fired": 0, "resolved": 0}


def test_reviews_fire_it_once_and_resolve_it_when_precision_recovers(
    bob: Any,
    api: Any,
    acme_violations: list[Violation],
    precision_rule: AlertRule,
    django_capture_on_commit_callbacks: Any,
) -> None:
    client = api(bob)
    with django_capture_on_commit_callbacks(execute=True):  # the write path: no periodic check
        for violation in acme_violations[:2]:
            review(client, violation, "false-positive")
        review(client, acme_violations[2], "acknowledged")
    firing = Firing.objects.get()
    assert firing.state == "firing"
    assert {key: firing.observed[key] for key in ("reviewed", "falsePositives", "precision", "threshold")} == {
        "reviewed": 3,
        "falsePositives": 2,
        "precision": 0.3333,
        "threshold": 0.8,
    }
    assert "precision 33% is under 80%" in firing.summary
    assert Delivery.objects.filter(firing=firing, event="fired", state="delivered").count() == 1

    with django_capture_on_commit_callbacks(execute=True):
        review(client, acme_violations[3], "false-positive")  # still under: the same episode
    assert evaluate_rules() == {"fired": 0, "resolved": 0}
    assert Firing.objects.count() == 1

    with django_capture_on_commit_callbacks(execute=True):
        for violation in acme_violations[4:]:
            review(client, violation, "acknowledged")
    assert Firing.objects.get().state == "firing"  # 3 false positives of 6 reviewed: 50%

    corrected = [v.pk for v in (acme_violations[0], acme_violations[1], acme_violations[3])]
    with django_capture_on_commit_callbacks(execute=True):  # the reviewers change their minds
        for state in ("open", "acknowledged"):
            answer = client.post("/api/v1/violations/review", {"ids": corrected, "state": state}, format="json")
            assert answer.status_code == 200 and sorted(answer.json()["reviewed"]) == corrected
    firing.refresh_from_db()
    assert firing.state == "resolved"
    observed = firing.resolved_observed or {}
    assert (observed["precision"], observed["reviewed"]) == (1.0, 6)
    assert list(Delivery.objects.filter(firing=firing).values_list("event", flat=True).order_by("pk")) == [
        "fired",
        "resolved",
    ]


def test_the_periodic_check_resolves_it_when_the_reviews_leave_the_window(
    bob: Any,
    api: Any,
    acme_violations: list[Violation],
    precision_rule: AlertRule,
    django_capture_on_commit_callbacks: Any,
) -> None:
    with django_capture_on_commit_callbacks(execute=True):
        for violation in acme_violations[:3]:
            review(api(bob), violation, "false-positive")
    assert Firing.objects.get().state == "firing"
    assert evaluate_rules() == {"fired": 0, "resolved": 0}
    later = timezone.now() + timedelta(days=8)
    assert evaluate_rules(later) == {"fired": 0, "resolved": 1}
    firing = Firing.objects.get()
    assert firing.state == "resolved" and (firing.resolved_observed or {})["reviewed"] == 0


def test_the_periodic_check_fires_it_too(
    bob: Any, api: Any, acme: Any, acme_violations: list[Violation], acme_guardrail: Any
) -> None:
    client = api(bob)
    for violation in acme_violations[:3]:
        review(client, violation, "false-positive")  # no commit in this test: nothing evaluated yet
    assert not Firing.objects.exists()
    channel = save_channel(acme, {"name": "mail", "kind": "email", "emails": ["ops@example.org"]}, "fixture")
    save_rule(acme, {"name": "p", "kind": "precision", "params": PARAMS, "channels": [channel]}, "fixture")
    assert evaluate_rules() == {"fired": 1, "resolved": 0}
    assert evaluate_rules() == {"fired": 0, "resolved": 0}


def test_an_author_adds_a_precision_rule_on_the_page(alice: Any, acme_guardrail: Any) -> None:
    client = signed_in(alice)
    assert b"precision" in client.get("/alerts/").content
    bad = client.post(
        "/alerts/",
        {
            "action": "add-rule",
            "name": "p",
            "kind": "precision",
            "params": '{"guardrail": "no-refunds", "threshold": 2}',
            "enabled": "on",
        },
    )
    assert bad.status_code == 400 and "/params/threshold" in bad.content.decode()
    answer = client.post(
        "/alerts/",
        {
            "action": "add-rule",
            "name": "p",
            "kind": "precision",
            "params": '{"guardrail": "no-refunds", "threshold": 0.9}',
            "enabled": "on",
        },
    )
    assert answer.status_code == 302
    rule = AlertRule.objects.get()
    assert rule.kind == "precision" and rule.params == {"guardrail": "no-refunds", "threshold": 0.9}
    assert client.get(f"/alerts/rules/{rule.pk}/").status_code == 200


def test_charlie_gets_nothing_of_acmes_precision_rule_and_cannot_watch_acmes_guardrail(
    charlie: Any, charlie_key: Any, api: Any, precision_rule: AlertRule
) -> None:
    channel = Channel.objects.get()
    for client in (api(charlie), api(charlie_key)):
        assert client.get("/api/v1/alert-rules").json()["results"] == []
        assert client.get(f"/api/v1/alert-rules/{precision_rule.pk}").status_code == 404
    writer = api(charlie)
    assert (
        writer.put(f"/api/v1/alert-rules/{precision_rule.pk}", {**RULE, "tenant": "globex"}, format="json").status_code
        == 404
    )
    assert writer.delete(f"/api/v1/alert-rules/{precision_rule.pk}").status_code == 404
    assert writer.post("/api/v1/alert-rules", RULE, format="json").status_code == 403
    # acme's guardrail does not exist for globex: the same answer as an unknown id
    own = writer.post("/api/v1/alert-rules", {**RULE, "tenant": "globex"}, format="json")
    assert own.status_code == 400
    assert own.json()["errors"] == [
        {"path": "/params/guardrail", "message": "there is no guardrail 'no-refunds' in globex"}
    ]
    page = signed_in(charlie)
    assert page.get(f"/alerts/rules/{precision_rule.pk}/").status_code == 404
    assert page.post(f"/alerts/rules/{precision_rule.pk}/", {"action": "delete"}).status_code == 404
    assert (
        page.post(
            f"/alerts/rules/{precision_rule.pk}/",
            {"name": "x", "kind": "precision", "params": '{"guardrail": "no-refunds", "threshold": 0.5}'},
        ).status_code
        == 404
    )
    assert (
        page.post(
            "/alerts/",
            {
                "action": "add-rule",
                "name": "p",
                "kind": "precision",
                "params": '{"guardrail": "no-refunds", "threshold": 0.5}',
            },
        ).status_code
        == 400
    )
    assert "refund precision" not in page.get("/alerts/").content.decode()
    precision_rule.refresh_from_db()
    assert precision_rule.params == PARAMS and AlertRule.objects.count() == 1 and Channel.objects.get() == channel


def test_one_tenants_reviews_never_move_anothers_rule(
    acme: Any, globex: Any, bob: Any, api: Any, django_capture_on_commit_callbacks: Any
) -> None:
    """A console-wide guardrail applies to both: each tenant's rule sees its own reviews."""
    save_guardrail(make_guardrail(), Author(user=None, label="fixture"))
    seed.traces(acme, 3)
    save_rule(globex, {"name": "globex precision", "kind": "precision", "params": PARAMS}, "fixture")
    save_rule(acme, {"name": "acme precision", "kind": "precision", "params": PARAMS}, "fixture")
    with django_capture_on_commit_callbacks(execute=True):
        for violation in seed.violations(acme):
            review(api(bob), violation, "false-positive")
    assert list(Firing.objects.values_list("rule__name", flat=True)) == ["acme precision"]
    assert evaluate_rules() == {"fired": 0, "resolved": 0}
