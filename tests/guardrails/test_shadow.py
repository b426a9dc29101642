"""Shadow mode: a guardrail (here an llm-judge) judged and recorded, never halting and never a
violation, optionally on a sample of traces; promoted from its page; the export unchanged."""

from __future__ import annotations

from typing import Any

from django.test import Client

from guardrails.models import Guardrail
from guardrails.services import Author, save_guardrail
from tests.conftest import make_trace
from tests.fakeproviders import Answer, FakeProvider
from tests.traces.test_judge_ledger import judge_document, local_judge  # noqa: F401 (fixtures)
from traces.models import EvaluationResult, Violation

FAIL = '{"verdict": "FAIL", "reason": "promises a refund"}'


def acme_tenant() -> Any:
    """acme, which owns the judge here: its authors (alice) change it; a console-wide one is
    for console admins."""
    from kindgi_console.tenancy.models import Tenant

    return Tenant.objects.get(slug="acme")


def halting_judge() -> Guardrail:
    return save_guardrail(
        judge_document(action={"on-violation": "halt"}), Author(user=None, label="t"), owner=acme_tenant()
    )


def evaluate(api: Any, key: str, trace_id: str) -> dict[str, Any]:
    answer = api(key).post("/api/v1/evaluate", make_trace(trace_id, toolCalls=[]), format="json")
    assert answer.status_code == 200, answer.json()
    return answer.json()


def test_a_judge_in_shadow_is_recorded_but_never_halts_nor_is_a_violation(
    api: Any, alice: Any, acme_key: str, fake_provider: FakeProvider, local_judge: Any
) -> None:
    halting_judge()
    fake_provider.script(Answer(FAIL, 100, 10), Answer(FAIL, 100, 10))
    assert evaluate(api, acme_key, "enforced")["turn"] == "failed"
    shadowed = api(alice).post("/api/v1/guardrails/no-refund-promises/shadow", {"shadow": True}, format="json")
    assert shadowed.status_code == 200 and shadowed.json()["shadow"] is True
    verdict = evaluate(api, acme_key, "in-shadow")
    assert verdict["turn"] == "completed"
    result = next(r for r in verdict["results"] if r["guardrail"] == "no-refund-promises")
    assert result["status"] == "fail" and result["details"]["shadow"] is True
    stored = EvaluationResult.objects.get(trace__trace_id="in-shadow")
    assert stored.shadow and stored.status == "fail"
    assert not Violation.objects.filter(trace__trace_id="in-shadow").exists()
    assert Violation.objects.filter(trace__trace_id="enforced").count() == 1


def test_a_sampling_rate_judges_a_stable_share_of_traces(
    api: Any, alice: Any, acme_key: str, fake_provider: FakeProvider, local_judge: Any
) -> None:
    halting_judge()
    api(alice).post("/api/v1/guardrails/no-refund-promises/shadow", {"shadow": True, "sampleRate": 0.25}, format="json")
    for n in range(40):
        evaluate(api, acme_key, f"s-{n}")
    judged = EvaluationResult.objects.filter(guardrail__guardrail_id="no-refund-promises").count()
    assert 2 <= judged <= 20


def test_promote_from_the_page_and_the_export_is_unchanged(api: Any, alice: Any, bob: Any, local_judge: Any) -> None:
    guardrail = halting_judge()
    before = api(alice).get("/api/v1/guardrails/export").json()
    client = Client()
    client.force_login(alice)
    client.post("/guardrails/no-refund-promises/shadow/", {"shadow": "true", "sample_percent": "10"})
    guardrail.refresh_from_db()
    assert (guardrail.shadow, guardrail.shadow_sample_rate) == (True, 0.1)
    html = client.get("/guardrails/no-refund-promises/").content.decode()
    assert "In shadow" in html and "Promote revision 1 to enforced" in html
    assert api(alice).get("/api/v1/guardrails/export").json() == before
    reviewer = Client()
    reviewer.force_login(bob)
    assert "Promote revision 1 to enforced" not in reviewer.get("/guardrails/no-refund-promises/").content.decode()
    assert reviewer.post("/guardrails/no-refund-promises/shadow/", {"shadow": "false"}).status_code == 403
    client.post("/guardrails/no-refund-promises/shadow/", {"shadow": "false"})
    guardrail.refresh_from_db()
    assert (guardrail.shadow, guardrail.shadow_sample_rate) == (False, None)


def test_any_guardrail_goes_in_shadow_and_bad_bodies_name_the_field(
    api: Any, alice: Any, bob: Any, charlie_key: str, acme_guardrail: Any, local_judge: Any
) -> None:
    halting_judge()
    url = "/api/v1/guardrails/{}/shadow"
    zero_llm = api(alice).post(url.format("no-refunds"), {"shadow": True}, format="json")
    assert zero_llm.status_code == 200 and zero_llm.json()["shadow"] is True
    for body, pointer in (
        ({"shadow": "yes"}, "/shadow"),
        ({"shadow": True, "sampleRate": 0}, "/sampleRate"),
        ({"shadow": True, "x": 1}, "/x"),
    ):
        answer = api(alice).post(url.format("no-refund-promises"), body, format="json")
        assert answer.status_code == 400 and answer.json()["errors"][0]["path"] == pointer
    assert api(bob).post(url.format("no-refund-promises"), {"shadow": True}, format="json").status_code == 403
    assert api(charlie_key).post(url.format("no-refund-promises"), {"shadow": True}, format="json").status_code in (
        403,
        404,
    )
    assert not Guardrail.objects.get(guardrail_id="no-refund-promises").shadow
