"""Shadow for every guardrail: a new one saved in shadow enforces nothing; an edit of an
enforced one saved in shadow runs beside the enforced revision, which stays enforced until
the shadow one is promoted (audited); the page shows what each caught; runs evaluate both."""

from __future__ import annotations

from typing import Any

from guardrails.models import Guardrail
from kindgi_console.audit.models import AuditEntry
from tests.conftest import make_guardrail, make_trace, signed_in
from tests.traces.test_evaluations import run_for, store_traces
from traces.models import EvaluationResult, Violation

URL = "/api/v1/guardrails/no-refunds"
#: A stricter revision: looking an order up fails too.
STRICTER = make_guardrail(config={"tools": ["issue_refund", "lookup_order"]})
LOOKUP_ONLY = [{"id": "c1", "name": "lookup_order", "arguments": {"order": "1"}, "result": "ok"}]


def evaluate(api: Any, key: str, trace_id: str, **fields: Any) -> dict[str, Any]:
    answer = api(key).post("/api/v1/evaluate", make_trace(trace_id, tenant="acme", **fields), format="json")
    assert answer.status_code == 200, answer.json()
    return answer.json()


def save_in_shadow(api: Any, who: Any, document: dict[str, Any]) -> Any:
    return api(who).put(f"{URL}?shadow=true", document, format="json")


def test_an_edit_saved_in_shadow_runs_beside_the_enforced_revision_until_promoted(
    api: Any, alice: Any, acme_key: str, acme_guardrail: Any
) -> None:
    answer = save_in_shadow(api, alice, STRICTER)
    assert answer.status_code == 200, answer.json()
    guardrail = Guardrail.objects.get(guardrail_id="no-refunds")
    assert (guardrail.revision, guardrail.shadow, guardrail.enforced_revision) == (2, True, 1)

    # The enforced revision still halts a refund; the shadow one is recorded beside it.
    verdict = evaluate(api, acme_key, "refund")
    assert verdict["turn"] == "failed"
    results = [r for r in verdict["results"] if r["guardrail"] == "no-refunds"]
    assert sorted((r["revision"], r["status"], bool(r["details"].get("shadow"))) for r in results) == [
        (1, "fail", False),
        (2, "fail", True),
    ]
    # Only the shadow revision fails a lookup: the turn goes on, and no violation is made.
    assert evaluate(api, acme_key, "lookup", toolCalls=LOOKUP_ONLY)["turn"] == "completed"
    stored = EvaluationResult.objects.filter(trace__trace_id="lookup")
    assert sorted(stored.values_list("revision__number", "status", "shadow")) == [(1, "pass", False), (2, "fail", True)]
    assert list(Violation.objects.values_list("trace__trace_id", "revision__number")) == [("refund", 1)]

    page = signed_in(alice).get("/guardrails/no-refunds/").content.decode()
    assert "Revision 2 in shadow beside enforced revision 1" in page
    assert "Caught only by the shadow revision (1)" in page and ">lookup</a>" in page
    assert "Promote revision 2 to enforced" in page

    promoted = api(alice).post(f"{URL}/shadow", {"shadow": False}, format="json")
    assert promoted.status_code == 200 and promoted.json()["enforcedRevision"] is None
    entry = AuditEntry.objects.filter(action="guardrail.promote").get()
    assert entry.actor == "alice" and entry.changes == {"shadow": [True, False], "enforcedRevision": [1, None]}
    assert evaluate(api, acme_key, "lookup-after", toolCalls=LOOKUP_ONLY)["turn"] == "failed"
    assert EvaluationResult.objects.filter(trace__trace_id="lookup-after").count() == 1


def test_a_new_guardrail_saved_in_shadow_enforces_nothing_and_a_plain_save_keeps_it_there(
    api: Any, alice: Any, acme: Any, acme_key: str
) -> None:
    created = api(alice).post("/api/v1/guardrails?shadow=true&tenant=acme", make_guardrail(), format="json")
    assert created.status_code == 201, created.json()
    assert AuditEntry.objects.filter(action="guardrail.shadow").count() == 1
    assert evaluate(api, acme_key, "refund")["turn"] == "completed"
    assert not Violation.objects.exists()
    assert api(alice).put(URL, STRICTER, format="json").status_code == 200
    guardrail = Guardrail.objects.get(guardrail_id="no-refunds")
    assert (guardrail.revision, guardrail.shadow, guardrail.enforced_revision) == (2, True, None)
    assert api(alice).put(f"{URL}?shadow=maybe", STRICTER, format="json").json()["errors"][0]["path"] == "/shadow"


def test_a_run_evaluates_both_revisions_and_counts_what_is_enforced(
    api: Any, alice: Any, acme: Any, acme_guardrail: Any
) -> None:
    save_in_shadow(api, alice, STRICTER)
    store_traces(acme, 6)  # every third trace refunds; all look an order up
    run = run_for(acme)
    assert run.status == "succeeded", run.error
    results = EvaluationResult.objects.filter(evaluation=run)
    assert results.filter(shadow=False, revision__number=1).count() == 6
    assert results.filter(shadow=True, revision__number=2, status="fail").count() == 6
    assert run.summary["no-refunds"]["fail"] == 2 and run.summary["no-refunds"]["pass"] == 4
    assert set(Violation.objects.filter(evaluation=run).values_list("revision__number", flat=True)) == {1}
    assert run.guardrails == ["no-refunds"]


def test_another_tenants_author_and_a_reviewer_cannot_promote(
    api: Any, alice: Any, bob: Any, charlie: Any, acme_guardrail: Any
) -> None:
    save_in_shadow(api, alice, STRICTER)
    assert save_in_shadow(api, charlie, STRICTER).status_code == 404
    assert api(charlie).post(f"{URL}/shadow", {"shadow": False}, format="json").status_code == 404
    assert signed_in(charlie).post("/guardrails/no-refunds/shadow/", {"shadow": "false"}).status_code == 404
    assert signed_in(charlie).get("/guardrails/no-refunds/").status_code == 404
    assert api(bob).post(f"{URL}/shadow", {"shadow": False}, format="json").status_code == 403
    assert signed_in(bob).post("/guardrails/no-refunds/shadow/", {"shadow": "false"}).status_code == 403
    guardrail = Guardrail.objects.get(guardrail_id="no-refunds")
    assert (guardrail.shadow, guardrail.enforced_revision) == (True, 1)
    assert not AuditEntry.objects.filter(action="guardrail.promote").exists()
