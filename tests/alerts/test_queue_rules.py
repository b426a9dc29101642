"""The queue rules: `queue_size` fires when a review queue holds more open violations than its
threshold, `queue_age` when the queue's oldest open violation that nobody claimed waits longer
than its limit; each fires once per episode and resolves when reviewing or claiming clears
it. The form gives each its own fields. charlie's rule on a queue of the same name in globex
counts none of acme's violations."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from alerts.firing import evaluate_rules
from alerts.models import AlertRule, Delivery, Firing
from alerts.services import save_channel, save_rule
from kindgi_console.tenancy.models import Tenant
from kindgi_console.tenancy.scoping import Caller
from tests.conftest import signed_in
from tests.traces import seed
from tests.traces.test_review_queues import QUEUE, escalating
from traces.models import Violation
from traces.review import claims
from traces.review import workflow as review

pytestmark = pytest.mark.django_db

SIZE = {"queue": QUEUE, "threshold": 2}
AGE = {"queue": QUEUE, "maxAgeMinutes": 60}
ACME = {"tenant": "acme"}


def rule(tenant: Tenant, kind: str, params: dict[str, Any]) -> AlertRule:
    channel = save_channel(tenant, {"name": "mail", "kind": "email", "emails": ["ops@example.org"]}, "fixture")
    return save_rule(tenant, {"name": kind, "kind": kind, "params": params, "channels": [channel]}, "fixture")


@pytest.fixture
def queued(acme: Tenant) -> list[Violation]:
    """Three open violations in acme's research-leads queue, oldest first."""
    escalating(acme)
    seed.traces(acme, 3)
    return list(Violation.objects.filter(queue=QUEUE).order_by("created_at", "pk"))


def age(violations: list[Violation], minutes: int) -> None:
    """Make the violations `minutes` old."""
    Violation.objects.filter(pk__in=[v.pk for v in violations]).update(
        created_at=timezone.now() - timedelta(minutes=minutes)
    )


@pytest.mark.parametrize(
    ("kind", "params", "path"),
    [
        ("queue_size", {"threshold": 2}, "/params/queue"),
        ("queue_size", {"queue": QUEUE}, "/params/threshold"),
        ("queue_size", {"queue": "", "threshold": 2}, "/params/queue"),
        ("queue_size", {"queue": QUEUE, "threshold": -1}, "/params/threshold"),
        ("queue_size", {"queue": QUEUE, "threshold": "many"}, "/params/threshold"),
        ("queue_age", {"queue": QUEUE}, "/params/maxAgeMinutes"),
        ("queue_age", {"queue": QUEUE, "maxAgeMinutes": 0}, "/params/maxAgeMinutes"),
        ("queue_age", {"queue": QUEUE, "maxAgeMinutes": 60, "threshold": 2}, "/params"),
    ],
)
def test_an_invalid_queue_rule_is_a_400_naming_the_field(
    alice: Any, api: Any, kind: str, params: dict[str, Any], path: str
) -> None:
    answer = api(alice).post(
        "/api/v1/alert-rules", {**ACME, "name": "q", "kind": kind, "params": params}, format="json"
    )
    assert answer.status_code == 400, answer.json()
    assert path in [error["path"] for error in answer.json()["errors"]]
    assert not AlertRule.objects.exists()


def test_an_author_creates_queue_rules_through_the_api(alice: Any, api: Any) -> None:
    for kind, params in (("queue_size", SIZE), ("queue_age", AGE)):
        body = {**ACME, "name": kind, "kind": kind, "params": params}
        answer = api(alice).post("/api/v1/alert-rules", body, format="json")
        assert answer.status_code == 201, answer.json()
        assert (answer.json()["kind"], answer.json()["params"]) == (kind, params)


def test_the_size_rule_fires_over_its_threshold_and_resolves_as_reviews_close_the_queue(
    acme: Tenant, bob: Any, queued: list[Violation]
) -> None:
    size = rule(acme, "queue_size", SIZE)
    assert evaluate_rules() == {"fired": 1, "resolved": 0}
    firing = Firing.objects.get(rule=size)
    assert firing.observed == {"queue": QUEUE, "open": 3, "threshold": 2}
    assert firing.summary == f"3 open violation(s) in queue {QUEUE} (over 2)"
    assert evaluate_rules() == {"fired": 0, "resolved": 0}  # the same episode

    review.review_one(queued[0].pk, "acknowledged", "", Caller(user=bob))
    assert evaluate_rules() == {"fired": 0, "resolved": 1}
    firing.refresh_from_db()
    assert firing.state == "resolved" and (firing.resolved_observed or {})["open"] == 2
    assert list(Delivery.objects.filter(firing=firing).order_by("pk").values_list("event", flat=True)) == [
        "fired",
        "resolved",
    ]


def test_the_age_rule_fires_on_the_oldest_unclaimed_and_claiming_it_resolves(
    acme: Tenant, bob: Any, queued: list[Violation]
) -> None:
    oldest, second, _newest = queued
    age([oldest], 90)
    age([second], 30)
    waiting = rule(acme, "queue_age", AGE)
    assert evaluate_rules() == {"fired": 1, "resolved": 0}
    firing = Firing.objects.get(rule=waiting)
    assert (firing.observed["oldest"], firing.observed["ageMinutes"]) == (oldest.pk, 90)
    assert f"oldest unclaimed violation ({oldest.pk}) waits 90 min (over 60 min)" in firing.summary

    claims.claim(oldest.pk, Caller(user=bob))  # taken: the next one waits 30 minutes
    assert evaluate_rules() == {"fired": 0, "resolved": 1}
    firing.refresh_from_db()
    assert (firing.resolved_observed or {})["oldest"] == second.pk

    claims.unclaim(oldest.pk, Caller(user=bob))
    assert evaluate_rules() == {"fired": 1, "resolved": 0}  # a new episode
    review.review_one(oldest.pk, "resolved", "", Caller(user=bob))
    assert evaluate_rules(timezone.now() + timedelta(minutes=20)) == {"fired": 0, "resolved": 1}
    assert evaluate_rules(timezone.now() + timedelta(minutes=40)) == {"fired": 1, "resolved": 0}  # second waits 70


def test_an_empty_queue_fires_neither(acme: Tenant) -> None:
    rule(acme, "queue_size", {"queue": "nobody-escalates-here", "threshold": 0})
    save_rule(acme, {"name": "age", "kind": "queue_age", "params": {"queue": "nobody", "maxAgeMinutes": 1}}, "x")
    assert evaluate_rules() == {"fired": 0, "resolved": 0}


def test_charlies_rule_on_a_queue_of_the_same_name_counts_nothing_of_acmes(
    api: Any, acme: Tenant, globex: Tenant, charlie: Any, queued: list[Violation]
) -> None:
    age(queued, 600)
    rule(globex, "queue_size", {"queue": QUEUE, "threshold": 0})
    save_rule(globex, {"name": "age", "kind": "queue_age", "params": AGE}, "charlie")
    assert evaluate_rules() == {"fired": 0, "resolved": 0}
    acmes = save_rule(acme, {"name": "leads", "kind": "queue_size", "params": SIZE}, "fixture")
    assert evaluate_rules() == {"fired": 1, "resolved": 0}
    client = api(charlie)
    assert client.get(f"/api/v1/alert-rules/{acmes.pk}").status_code == 404
    changed = {"tenant": "acme", "name": "mine", "kind": "queue_size", "params": {"queue": QUEUE, "threshold": 99}}
    assert client.put(f"/api/v1/alert-rules/{acmes.pk}", changed, format="json").status_code in (403, 404)
    assert client.post("/api/v1/alert-rules", changed, format="json").status_code == 403
    assert [r.name for r in signed_in(charlie).get("/alerts/").context["rules"]] == ["age", "queue_size"]


def test_the_form_gives_each_queue_rule_its_own_fields(alice: Any, acme: Tenant) -> None:
    client = signed_in(alice)
    page = client.get("/alerts/").content.decode()
    for field in ("queue_size.queue", "queue_size.threshold", "queue_age.queue", "queue_age.maxAgeMinutes"):
        assert f'name="{field}"' in page
    assert "Oldest waits at most (minutes)" in page
    refused = client.post(
        "/alerts/", {"action": "add-rule", "name": "q", "kind": "queue_age", "queue_age.maxAgeMinutes": "30"}
    )
    assert refused.status_code == 400 and "/params/queue" in refused.content.decode()
    answer = client.post(
        "/alerts/",
        {
            "action": "add-rule",
            "name": "leads wait",
            "kind": "queue_age",
            "queue_age.queue": QUEUE,
            "queue_age.maxAgeMinutes": "30",
            "enabled": "on",
        },
    )
    assert answer.status_code == 302
    saved = AlertRule.objects.get()
    assert (saved.kind, saved.params) == ("queue_age", {"queue": QUEUE, "maxAgeMinutes": 30})
    edit = client.get(f"/alerts/rules/{saved.pk}/").content.decode()
    assert f'name="queue_age.queue" maxlength="200" value="{QUEUE}"' in edit
