"""Review queues: a violation of an `escalate` guardrail lands in the queue its `escalateTo`
names, on every path that stores or finds violations; reviewers filter by queue and by who
claimed it, claim and release one (audited), and another tenant's person or key neither
sees nor claims acme's."""

from __future__ import annotations

from typing import Any

import pytest

from guardrails.services import Author, save_guardrail
from kindgi_console.audit.models import AuditEntry
from kindgi_console.tenancy.models import ApiKey, Tenant
from kindgi_console.tenancy.scoping import Caller
from tests.conftest import make_guardrail, make_trace, member, signed_in
from tests.traces import seed
from tests.traces.test_one_violation_per_finding import run_for
from traces.models import DEFAULT_QUEUE, Violation, escalation_queue
from traces.review import claims
from traces.review import workflow as review

QUEUE = "research-leads"
#: More traces than one statement's few rows: a run copies its results fresh.
MANY = 70


def escalating(tenant: Tenant | None, guardrail_id: str = "refunds-to-leads", queue: str | None = QUEUE) -> Any:
    """A guardrail that escalates a turn calling issue_refund (every seeded trace does)."""
    action: dict[str, Any] = {"on-violation": "escalate"}
    if queue is not None:
        action["escalateTo"] = queue
    return save_guardrail(make_guardrail(guardrail_id, action=action), Author(user=None, label="fixture"), owner=tenant)


@pytest.fixture
def erin(acme: Tenant) -> Any:
    """A second reviewer of acme."""
    return member("erin", acme, "reviewer")


@pytest.fixture
def queued(acme: Tenant) -> list[Violation]:
    """Three violations of acme in the research-leads queue, newest first (and, when the
    test asks for `halt_guardrail` before, three of no-refunds in no queue)."""
    escalating(acme)
    seed.traces(acme, 3)
    return list(Violation.objects.filter(tenant=acme, queue=QUEUE).order_by("-created_at", "-pk"))


# ------------------------------------------------------------------ the queue a violation lands in


@pytest.mark.parametrize(
    ("action", "queue"),
    [
        ({"on-violation": "escalate", "escalateTo": "support-leads"}, "support-leads"),
        ({"on-violation": "escalate", "escalateTo": "  support-leads "}, "support-leads"),
        ({"on-violation": "escalate"}, DEFAULT_QUEUE),
        ({"on-violation": "escalate", "escalateTo": ""}, DEFAULT_QUEUE),
        ({"on-violation": "escalate", "escalateTo": "x" * 300}, "x" * 200),
        ({"on-violation": "log-only", "escalateTo": "support-leads"}, None),
        ({"on-violation": "halt"}, None),
    ],
)
def test_the_queue_is_the_escalateto_of_an_escalate_guardrail(action: dict[str, Any], queue: str | None) -> None:
    assert escalation_queue({"action": action}) == queue


def test_the_runtime_puts_an_escalate_guardrails_violations_in_its_queue(
    api: Any, acme: Tenant, acme_key: str, halt_guardrail: Any
) -> None:
    escalating(acme)
    body = api(acme_key).post("/api/v1/evaluate", data=make_trace("turn-1", tenant=acme.slug), format="json").json()
    assert body["turn"] == "failed"  # the halt guardrail; the escalate one records
    queues = dict(Violation.objects.values_list("guardrail__guardrail_id", "queue"))
    assert queues == {"no-refunds": None, "refunds-to-leads": QUEUE}


def test_ingested_traces_evaluated_in_the_background_land_in_the_queue(acme: Tenant) -> None:
    escalating(acme, queue=None)
    seed.traces(acme, 4)
    assert list(Violation.objects.values_list("queue", flat=True).distinct()) == [DEFAULT_QUEUE]


@pytest.mark.parametrize("count", [3, MANY], ids=["a few rows", "copied fresh"])
def test_a_run_puts_its_new_violations_in_the_queue(acme: Tenant, count: int) -> None:
    escalating(acme)
    for n in range(count):
        seed.run_trace(acme, make_trace(f"t-{n}", tenant=acme.slug)).save()
    run = run_for(acme)
    assert run.status == "succeeded"
    assert Violation.objects.filter(evaluation=run, queue=QUEUE).count() == count


def test_a_new_revision_escalating_elsewhere_is_a_new_finding_in_its_own_queue(
    api: Any, acme: Tenant, alice: Any, bob: Any
) -> None:
    escalating(acme)
    seed.traces(acme, 2)
    first = seed.violations(acme)
    claims.claim(first[0].pk, Caller(user=bob))
    edited = make_guardrail("refunds-to-leads", action={"on-violation": "escalate", "escalateTo": "legal"})
    assert api(alice).put("/api/v1/guardrails/refunds-to-leads", edited, format="json").status_code == 200

    run_for(acme)  # re-evaluating the past traces against revision 2

    by_revision = sorted(Violation.objects.values_list("revision__number", "queue", "assignee"), key=str)
    assert by_revision == [(1, QUEUE, "bob"), (1, QUEUE, None), (2, "legal", None), (2, "legal", None)]


# ------------------------------------------------------------------ listing by queue and claim


def test_the_list_filters_by_queue_and_by_who_claimed_it(
    api: Any, acme: Tenant, bob: Any, erin: Any, halt_guardrail: Any, queued: list[Violation]
) -> None:
    claims.claim(queued[1].pk, Caller(user=bob))
    client = api(bob)

    def listed(query: str) -> list[int]:
        answer = client.get(f"/api/v1/violations?{query}")
        assert answer.status_code == 200, answer.json()
        return [item["id"] for item in answer.json()["results"]]

    assert len(listed("")) == 6  # no-refunds' three are in no queue
    in_queue = listed(f"queue={QUEUE}")
    assert in_queue == [v.pk for v in queued]
    assert listed("queue=legal") == []
    assert listed(f"queue={QUEUE}&assignee=me") == [queued[1].pk]
    assert listed("assignee=bob") == [queued[1].pk]
    assert set(listed(f"queue={QUEUE}&assignee=none")) == set(in_queue) - {queued[1].pk}
    assert api(erin).get("/api/v1/violations?assignee=me").json()["results"] == []
    item = client.get(f"/api/v1/violations/{queued[1].pk}").json()
    assert (item["queue"], item["assignee"]) == (QUEUE, "bob") and item["assignedAt"]


def test_a_bulk_review_selects_by_queue_and_the_callers_claims(
    api: Any, acme: Tenant, bob: Any, queued: list[Violation]
) -> None:
    claims.claim(queued[0].pk, Caller(user=bob))
    body = {"filter": {"queue": QUEUE, "assignee": "me"}, "state": "acknowledged"}
    answer = api(bob).post("/api/v1/violations/review", body, format="json")
    assert answer.json()["reviewed"] == [queued[0].pk]


def test_bob_claims_erin_is_refused_with_who_holds_it_and_bob_releases(
    api: Any, acme: Tenant, bob: Any, erin: Any, queued: list[Violation]
) -> None:
    violation = queued[0]
    url = f"/api/v1/violations/{violation.pk}"
    claimed = api(bob).post(f"{url}/claim")
    assert claimed.status_code == 200
    assert claimed.json()["assignee"] == "bob" and claimed.json()["assignedAt"]
    assert api(bob).post(f"{url}/claim").json() == claimed.json()  # one's own again: nothing changes

    for action in ("claim", "unclaim"):
        refused = api(erin).post(f"{url}/{action}")
        assert refused.status_code == 409
        (error,) = refused.json()["errors"]
        assert error["path"] == "/assignee" and error["message"].startswith(f"bob holds violation {violation.pk} since")
    assert api(erin).get(url).json()["assignee"] == "bob"  # shown to the others

    released = api(bob).post(f"{url}/unclaim")
    assert released.json() == {"id": violation.pk, "assignee": None, "assignedAt": None}
    assert api(erin).post(f"{url}/claim").json()["assignee"] == "erin"
    entries = AuditEntry.objects.filter(object_id=str(violation.pk)).order_by("pk")
    assert [(e.action, e.actor, e.changes) for e in entries] == [
        ("violation.claim", "bob", {"assignee": [None, "bob"]}),
        ("violation.unclaim", "bob", {"assignee": ["bob", None]}),
        ("violation.claim", "erin", {"assignee": [None, "erin"]}),
    ]
    assert {e.tenant_id for e in entries} == {acme.pk}


def test_an_admin_of_the_tenant_releases_anyones_claim(
    api: Any, acme: Tenant, bob: Any, dana: Any, queued: list[Violation]
) -> None:
    claims.claim(queued[0].pk, Caller(user=bob))
    assert api(dana).post(f"/api/v1/violations/{queued[0].pk}/claim").status_code == 409
    released = api(dana).post(f"/api/v1/violations/{queued[0].pk}/unclaim")
    assert released.status_code == 200 and released.json()["assignee"] is None
    entry = AuditEntry.objects.get(action="violation.unclaim")
    assert (entry.actor, entry.changes) == ("dana", {"assignee": ["bob", None]})


def test_a_closed_violation_is_not_claimed_until_reopened(
    api: Any, acme: Tenant, bob: Any, queued: list[Violation]
) -> None:
    review.review_one(queued[0].pk, "resolved", "", Caller(user=bob))
    refused = api(bob).post(f"/api/v1/violations/{queued[0].pk}/claim")
    assert refused.status_code == 409 and refused.json()["errors"][0]["path"] == "/state"
    assert "reopen it" in refused.json()["errors"][0]["message"]
    review.review_one(queued[0].pk, "open", "", Caller(user=bob))
    assert api(bob).post(f"/api/v1/violations/{queued[0].pk}/claim").status_code == 200


def test_a_key_with_the_review_scope_claims_under_its_label(api: Any, acme: Tenant, queued: list[Violation]) -> None:
    key, secret = ApiKey.issue(scopes=["read", "review"], tenant=acme, name="triage bot")
    claimed = api(secret).post(f"/api/v1/violations/{queued[0].pk}/claim").json()
    assert claimed["assignee"] == key.label
    listed = api(secret).get("/api/v1/violations?assignee=me").json()["results"]
    assert [item["id"] for item in listed] == [queued[0].pk]
    reader = ApiKey.issue(scopes=["read"], tenant=acme, name="reader")[1]
    assert api(reader).post(f"/api/v1/violations/{queued[1].pk}/claim").status_code == 403


def test_charlie_neither_sees_nor_claims_acmes_queue(
    api: Any, acme: Tenant, globex: Tenant, charlie: Any, charlie_key: str, bob: Any, queued: list[Violation]
) -> None:
    claims.claim(queued[0].pk, Caller(user=bob))
    globex_reviewer = ApiKey.issue(scopes=["read", "review"], tenant=globex, name="globex triage")[1]
    for client in (api(charlie), api(globex_reviewer)):
        assert client.get(f"/api/v1/violations?queue={QUEUE}").json()["results"] == []
        assert client.get("/api/v1/violations?assignee=bob").json()["results"] == []
        assert client.get(f"/api/v1/violations/{queued[0].pk}").status_code == 404
        for violation in queued[:2]:  # one claimed, one not
            for action in ("claim", "unclaim"):
                assert client.post(f"/api/v1/violations/{violation.pk}/{action}").status_code == 404
    assert api(charlie_key).post(f"/api/v1/violations/{queued[1].pk}/claim").status_code == 403  # no review scope
    page = signed_in(charlie)
    for violation in queued[:2]:
        for action in ("claim", "unclaim"):
            assert page.post(f"/violations/{violation.pk}/claim/", {"action": action}).status_code == 404
        assert page.get(f"/violations/queue/?at={violation.pk}").status_code == 404
    assert b"research-leads" not in page.get("/").content
    assert list(Violation.objects.order_by("-created_at", "-pk").values_list("assignee", flat=True)) == [
        "bob",
        None,
        None,
    ]
    assert not AuditEntry.objects.filter(action__startswith="violation.", actor="charlie").exists()


# ------------------------------------------------------------------ the pages


def test_the_review_queue_walks_one_queue_and_claims_from_the_page(
    acme: Tenant, bob: Any, erin: Any, halt_guardrail: Any, queued: list[Violation]
) -> None:
    page = signed_in(bob)
    assert page.get("/violations/queue/").context["left"] == 6  # no-refunds' three are in no queue
    walked = page.get(f"/violations/queue/?queue={QUEUE}")
    assert walked.status_code == 200
    assert walked.context["violation"].pk == queued[0].pk and walked.context["left"] == 3
    assert [value for value, _ in walked.context["form"].fields["queue"].choices] == ["", QUEUE]
    assert b"Nobody holds it" in walked.content and b'data-shortcut="c"' in walked.content

    at = f"/violations/queue/?queue={QUEUE}&at={queued[0].pk}"
    answer = page.post(f"/violations/{queued[0].pk}/claim/", {"action": "claim", "next": at}, follow=True)
    assert answer.redirect_chain[-1][0] == at
    assert b"You hold it" in answer.content and b"Release it" in answer.content
    assert "is yours since" in str(next(iter(answer.context["messages"])))

    seen = signed_in(erin).get(at)
    assert b"Claimed by <strong data-assignee>bob</strong>" in seen.content and b"Claim it" not in seen.content
    refused = signed_in(erin).post(f"/violations/{queued[0].pk}/claim/", {"action": "claim"}, follow=True)
    assert f"bob holds violation {queued[0].pk}" in str(next(iter(refused.context["messages"])))
    unclaimed = signed_in(erin).get(f"/violations/queue/?queue={QUEUE}&assignee=none")
    assert unclaimed.context["left"] == 2 and unclaimed.context["violation"].pk == queued[1].pk
    mine = signed_in(bob).get(f"/violations/queue/?queue={QUEUE}&assignee=me")
    assert mine.context["left"] == 1


def test_the_violation_page_and_list_show_the_queue_and_the_claim(
    acme: Tenant, bob: Any, erin: Any, queued: list[Violation]
) -> None:
    violation = queued[0]
    page = signed_in(bob).get(f"/violations/{violation.pk}/")
    assert b"Nobody holds it" in page.content and b'queue <span class="tag">research-leads</span>' in page.content
    signed_in(bob).post(f"/violations/{violation.pk}/claim/", {"action": "claim"})
    shown = signed_in(erin).get(f"/violations/{violation.pk}/").content
    assert b"Claimed by <strong data-assignee>bob</strong>" in shown
    listed = signed_in(erin).get(f"/violations/?queue={QUEUE}&assignee=none")
    assert [v.pk for v in listed.context["violations"]] == [v.pk for v in queued[1:]]
    assert b"claimed by bob" in signed_in(erin).get(f"/violations/?queue={QUEUE}").content
    released = signed_in(bob).post(f"/violations/{violation.pk}/claim/", {"action": "unclaim"}, follow=True)
    assert b"Nobody holds it" in released.content


def test_the_overview_counts_each_queues_open_and_unclaimed_violations(
    acme: Tenant, bob: Any, queued: list[Violation]
) -> None:
    escalating(acme, "refunds-to-legal", "legal")
    seed.traces(acme, 1, prefix="later")  # one more in each queue
    claims.claim(queued[0].pk, Caller(user=bob))
    review.review_one(queued[1].pk, "resolved", "", Caller(user=bob))
    page = signed_in(bob).get("/")
    assert page.context["queues"] == [
        {"name": "legal", "count": 1, "unclaimed": 1},
        {"name": QUEUE, "count": 3, "unclaimed": 2},
    ]
    assert b"/violations/queue/?queue=research-leads&amp;assignee=none" in page.content


def test_an_escalate_guardrails_page_links_to_its_queue(acme: Tenant, bob: Any, queued: list[Violation]) -> None:
    page = signed_in(bob).get("/guardrails/refunds-to-leads/").content.decode()
    assert f'to the review queue <a href="/violations/queue/?queue={QUEUE}">{QUEUE}</a>' in page


def test_past_the_queues_it_lists_the_overview_says_there_are_more(
    acme: Tenant, bob: Any, queued: list[Violation], monkeypatch: Any
) -> None:
    """The card lists MAX_QUEUES queues (each a few index probes) and says when more wait."""
    from kindgi_console import overview

    escalating(acme, "refunds-to-legal", "legal")
    seed.traces(acme, 1, prefix="later")
    assert b"data-more-queues" not in signed_in(bob).get("/").content
    monkeypatch.setattr(overview, "MAX_QUEUES", 1)
    page = signed_in(bob).get("/")
    assert [q["name"] for q in page.context["queues"]] == ["legal"] and page.context["more_queues"]
    assert b"data-more-queues" in page.content
