"""The llm-judge in the console, end to end over a real socket: a judge model registered at a
local OpenAI-compatible server, llm-judge guardrails evaluated over ingested traces, and the
cost ledger read back through the API, summing to the provider's usage times the prices."""

from __future__ import annotations

import csv
import io
from decimal import Decimal
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client

from guardrails.models import JudgeCacheEntry, JudgeModelRegistration
from guardrails.services import Author, enforced_guardrails, save_guardrail
from kindgi_console.tenancy.models import ApiKey, Tenant
from tests.conftest import make_trace
from tests.fakeproviders import Answer, FakeProvider, Raw
from traces.ingest.evaluate import evaluate_traces
from traces.judge.estimate import estimate_run
from traces.models import Evaluation, JudgeLedgerEntry, RunTrace

PRICE_IN, PRICE_OUT = Decimal("0.40"), Decimal("1.60")


def cost(input_tokens: int, output_tokens: int) -> Decimal:
    return (input_tokens * PRICE_IN + output_tokens * PRICE_OUT) / Decimal(1_000_000)


def judge_document(guardrail_id: str = "no-refund-promises", **fields: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "id": guardrail_id,
        "name": "The agent never promises a refund",
        "kind": "llm-judge",
        "check": "rubric",
        "config": {"criteria": "The agent never promises a refund."},
        "action": {"on-violation": "flag"},
        "severity": "warn",
        "judgeCapabilities": {"required": ["json"]},
        "budget": {"maxCostUsd": 0.0005, "maxLatencyMs": 30000},
    }
    doc.update(fields)
    return doc


@pytest.fixture
def local_judge(api: Any, root: User, fake_provider: FakeProvider) -> dict[str, Any]:
    """The fake provider's OpenAI endpoint, registered through the API by a superuser."""
    response = api(root).post("/api/v1/judge-models", data=fake_provider.registration("local"), format="json")
    assert response.status_code == 201, response.json()
    return response.json()


@pytest.fixture
def judge_guardrail(db: Any) -> Any:
    return save_guardrail(judge_document(), Author(user=None, label="fixture"))


def evaluate(client: Any, trace_id: str, **fields: Any) -> dict[str, Any]:
    response = client.post("/api/v1/evaluate", data=make_trace(trace_id, **fields), format="json")
    assert response.status_code == 200, response.json()
    return response.json()


def judge_result(answer: dict[str, Any]) -> dict[str, Any]:
    return next(r for r in answer["results"] if r["guardrail"] == "no-refund-promises")


# ------------------------------------------------------------------ the demo path


def test_judged_traces_give_verdicts_and_the_ledger_sums_usage_times_prices(
    api: Any, acme_key: str, bob: User, fake_provider: FakeProvider, local_judge: Any, judge_guardrail: Any
) -> None:
    usage = [(1200, 30), (800, 12), (950, 41)]
    fake_provider.script(
        Answer('{"verdict": "PASS", "reason": "no promise"}', *usage[0]),
        Answer('{"verdict": "FAIL", "reason": "promises a refund"}', *usage[1]),
        Answer("PASS - fine", *usage[2]),
    )
    client = api(acme_key)
    answers = [evaluate(client, f"run-{n}") for n in range(3)]
    assert [judge_result(a)["status"] for a in answers] == ["pass", "fail", "pass"]
    assert judge_result(answers[1])["reason"] == "promises a refund"
    assert judge_result(answers[0])["details"]["model"] == "local"
    assert len(fake_provider.requests) == 3

    entries = list(JudgeLedgerEntry.objects.order_by("pk").select_related("trace", "revision"))
    assert [(e.input_tokens, e.output_tokens) for e in entries] == usage
    assert [e.cost_usd for e in entries] == [cost(*u) for u in usage]
    assert [e.trace.trace_id for e in entries] == ["run-0", "run-1", "run-2"]
    assert {(e.model_id, e.provider, e.revision.number, e.evaluation_id) for e in entries} == {
        ("local", "openai", 1, None)
    }
    assert [e.outcome for e in entries] == ["PASS", "FAIL", "PASS"]
    assert all(e.billed and not e.cache_hit and e.attempts == 1 for e in entries)

    total = sum((cost(*u) for u in usage), Decimal(0))
    for reader in (api(bob), client):
        body = reader.get("/api/v1/ledger?group_by=guardrail,tenant").json()
        (group,) = body["groups"]
        assert group["guardrail"] == "no-refund-promises" and group["tenant"] == "acme"
        assert Decimal(group["costUsd"]) == total and group["costUsd"] == "0.0013128"
        assert group["calls"] == 3 and group["billedCalls"] == 3
        assert group["inputTokens"] == 2950 and group["outputTokens"] == 83
    (by_model,) = client.get("/api/v1/ledger?group_by=model").json()["groups"]
    assert by_model["model"] == "local" and Decimal(by_model["costUsd"]) == total
    listed = client.get("/api/v1/ledger/entries").json()["results"]
    assert [item["costUsd"] for item in listed] == ["0.0004456", "0.0003392", "0.000528"]
    assert listed[0]["trace"] == "run-2" and listed[0]["verdict"] == "PASS"


def test_calls_over_the_budget_are_flagged_and_counted(
    api: Any, acme_key: str, fake_provider: FakeProvider, local_judge: Any, judge_guardrail: Any
) -> None:
    fake_provider.script(
        Answer('{"verdict": "PASS"}', 1200, 30),  # 0.000528 > 0.0005
        Answer('{"verdict": "PASS"}', 100, 10),
    )
    client = api(acme_key)
    evaluate(client, "dear")
    evaluate(client, "cheap")
    flags = dict(JudgeLedgerEntry.objects.values_list("trace_ref", "over_budget_cost"))
    assert flags == {"dear": True, "cheap": False}
    (group,) = client.get("/api/v1/ledger").json()["groups"]
    assert group["overBudget"] == 1 and group["overCost"] == 1 and group["overLatency"] == 0
    # Declarative: the dear call still gave its verdict.
    assert JudgeLedgerEntry.objects.get(trace_ref="dear").verdict == "PASS"


def test_evaluating_a_trace_again_is_answered_from_the_cache(
    api: Any, acme_key: str, fake_provider: FakeProvider, local_judge: Any, judge_guardrail: Any
) -> None:
    client = api(acme_key)
    fake_provider.script(Answer('{"verdict": "FAIL", "reason": "promises"}', 500, 20))
    first = judge_result(evaluate(client, "again"))
    again = judge_result(evaluate(client, "again"))
    assert len(fake_provider.requests) == 1
    assert first["status"] == again["status"] == "fail"
    assert again["details"]["cached"] is True and again["details"]["costUsd"] == "0"
    billed = JudgeLedgerEntry.objects.filter(billed=True)
    assert billed.count() == 1
    hit = JudgeLedgerEntry.objects.get(cache_hit=True)
    assert (hit.cost_usd, hit.billed, hit.outcome, hit.trace.trace_id) == (0, False, "cached", "again")
    assert JudgeCacheEntry.objects.get().model_id == "local"
    (group,) = client.get("/api/v1/ledger").json()["groups"]
    assert (group["calls"], group["cacheHits"], group["costUsd"]) == (1, 1, "0.000232")


def test_a_billed_answer_that_cannot_be_read_is_an_error_recorded_and_not_cached(
    api: Any, acme_key: str, fake_provider: FakeProvider, local_judge: Any, judge_guardrail: Any
) -> None:
    fake_provider.script(Answer("I would rather not say", 700, 9), Answer("PASS", 700, 2))
    client = api(acme_key)
    result = judge_result(evaluate(client, "garbled"))
    assert result["status"] == "error" and "judge call failed" in result["reason"]
    entry = JudgeLedgerEntry.objects.get()
    assert entry.outcome == "error" and entry.billed and entry.cost_usd == cost(700, 9)
    assert entry.error and not entry.verdict
    assert JudgeCacheEntry.objects.count() == 0
    assert judge_result(evaluate(client, "garbled"))["status"] == "pass"  # asked again
    assert client.get("/api/v1/ledger").json()["groups"][0]["errors"] == 1


def test_a_call_the_provider_did_not_bill_is_recorded_unbilled(
    api: Any, acme_key: str, fake_provider: FakeProvider, local_judge: Any, judge_guardrail: Any
) -> None:
    fake_provider.script(Raw(400, b'{"error": {"message": "bad request"}}'))
    assert judge_result(evaluate(api(acme_key), "refused"))["status"] == "error"
    entry = JudgeLedgerEntry.objects.get()
    assert (entry.billed, entry.input_tokens, entry.cost_usd) == (False, None, 0)
    assert "HTTP 400" in entry.error


def test_ingested_traces_are_judged_at_the_runtime_and_charged_to_their_rows(
    api: Any,
    acme_key: str,
    fake_provider: FakeProvider,
    local_judge: Any,
    judge_guardrail: Any,
    django_capture_on_commit_callbacks: Any,
) -> None:
    traces = [make_trace(f"ingested-{n}") for n in range(2)]
    with django_capture_on_commit_callbacks(execute=True):
        response = api(acme_key).post("/api/v1/traces", data={"traces": traces}, format="json")
    assert response.status_code == 207
    rows = JudgeLedgerEntry.objects.select_related("trace").order_by("trace_ref")
    assert [(e.trace.trace_id, e.billed) for e in rows] == [("ingested-0", True), ("ingested-1", True)]
    assert len(fake_provider.requests) == 2


def test_a_batch_run_charges_its_evaluation(
    api: Any, acme: Tenant, acme_key: str, fake_provider: FakeProvider, local_judge: Any, judge_guardrail: Any
) -> None:
    api(acme_key).post("/api/v1/traces", data={"traces": [make_trace("batch-1")]}, format="json")
    run = Evaluation.objects.create(tenant=acme)
    traces = list(RunTrace.objects.select_related("tenant"))
    verdicts = evaluate_traces(traces, enforced_guardrails(), mode="ci", evaluation=run)
    assert {r.status for _, verdict in verdicts for r in verdict.results} <= {"pass", "fail"}
    entry = JudgeLedgerEntry.objects.get(evaluation=run)
    assert entry.trace.trace_id == "batch-1" and entry.billed
    assert run.results.count() == 1
    listed = api(acme_key).get(f"/api/v1/ledger/entries?guardrail={judge_guardrail.guardrail_id}")
    assert listed.json()["results"][0]["evaluation"] == run.pk


# ------------------------------------------------------------------ routing under a policy


def test_a_policy_that_excludes_the_only_capable_model_gives_an_error_saying_why(
    api: Any, acme_key: str, root: User, dana: User, fake_provider: FakeProvider, local_judge: Any, judge_guardrail: Any
) -> None:
    cheap = fake_provider.registration(
        "cheap", capabilities=[], pricing={"inputUsdPerMTok": "0.01", "outputUsdPerMTok": "0.01"}
    )
    assert api(root).post("/api/v1/judge-models", data=cheap, format="json").status_code == 201
    response = api(dana).put("/api/v1/tenants/acme/judge-policy", data={"allowedModels": ["cheap"]}, format="json")
    assert response.status_code == 200 and response.json() == {"allowedModels": ["cheap"]}
    result = judge_result(evaluate(api(acme_key), "routed"))
    assert result["status"] == "error"
    assert result["reason"] == ("no registered judge model has capabilities json and is allowed for tenant acme")
    assert fake_provider.requests == [] and JudgeLedgerEntry.objects.count() == 0
    # Allowing every model again routes to the capable one.
    api(dana).put("/api/v1/tenants/acme/judge-policy", data={"allowedModels": None}, format="json")
    assert judge_result(evaluate(api(acme_key), "routed-2"))["details"]["model"] == "local"


def test_the_policy_api_checks_ids_and_who_may_set_it(
    api: Any, alice: User, dana: User, acme_key: str, local_judge: Any
) -> None:
    url = "/api/v1/tenants/acme/judge-policy"
    assert api(alice).get(url).json() == {"allowedModels": None}
    bad = api(dana).put(url, data={"allowedModels": ["local", "ghost"]}, format="json")
    assert bad.status_code == 400
    assert bad.json()["errors"] == [{"path": "/allowedModels/1", "message": "no judge model 'ghost' is registered"}]
    wrong = api(dana).put(url, data={"allowedModels": "local"}, format="json")
    assert wrong.status_code == 400 and wrong.json()["errors"][0]["path"] == "/allowedModels"
    assert api(alice).put(url, data={"allowedModels": []}, format="json").status_code == 403
    assert api(acme_key).put(url, data={"allowedModels": []}, format="json").status_code == 403
    assert api(acme_key).get(url).status_code == 200


# ------------------------------------------------------------------ the judge-model registry


def test_registrations_are_validated_with_pointers(api: Any, root: User, fake_provider: FakeProvider) -> None:
    client = api(root)
    bad = fake_provider.registration("x", provider="gemini", pricing={"inputUsdPerMTok": "-1", "outputUsdPerMTok": 2})
    paths = {e["path"] for e in client.post("/api/v1/judge-models", data=bad, format="json").json()["errors"]}
    assert {"/provider", "/pricing/inputUsdPerMTok"} <= paths
    precise = fake_provider.registration("x", pricing={"inputUsdPerMTok": "0.0000001", "outputUsdPerMTok": "1"})
    response = client.post("/api/v1/judge-models", data=precise, format="json")
    assert response.status_code == 400
    assert response.json()["errors"] == [
        {"path": "/pricing/inputUsdPerMTok", "message": "a price has at most six decimal places"}
    ]
    assert client.post("/api/v1/judge-models", data=[1], format="json").status_code == 400
    assert (
        client.post("/api/v1/judge-models", data={"id": "x", "enabled": "yes"}, format="json").json()["errors"][0][
            "path"
        ]
        == "/enabled"
    )


def test_a_registration_round_trips_and_never_shows_a_key(
    api: Any, root: User, bob: User, fake_provider: FakeProvider, monkeypatch: Any
) -> None:
    monkeypatch.setenv("LOCAL_JUDGE_KEY", "sk-very-secret")
    doc = fake_provider.registration(
        "thinker",
        apiKeyEnv="LOCAL_JUDGE_KEY",
        model="fake-reasoner",
        thinking={"effort": "minimal"},
        sampling=False,
        capabilities=["json", "reasoning"],
    )
    created = api(root).post("/api/v1/judge-models", data=doc, format="json")
    assert created.status_code == 201
    read = api(bob).get("/api/v1/judge-models/thinker")
    assert read.status_code == 200 and "sk-very-secret" not in read.content.decode()
    body = read.json()
    assert body["apiKeySet"] is True and body["enabled"] is True
    assert {k: body[k] for k in doc if k != "pricing"} == {k: v for k, v in doc.items() if k != "pricing"}
    assert {k: Decimal(v) for k, v in body["pricing"].items()} == {
        "inputUsdPerMTok": PRICE_IN,
        "outputUsdPerMTok": PRICE_OUT,
    }
    assert api(root).post("/api/v1/judge-models", data=doc, format="json").status_code == 409
    renamed = api(root).put("/api/v1/judge-models/thinker", data={**doc, "id": "other"}, format="json")
    assert renamed.status_code == 400 and renamed.json()["errors"][0]["path"] == "/id"
    updated = api(root).put("/api/v1/judge-models/thinker", data={**body, "enabled": False}, format="json")
    assert updated.status_code == 200 and updated.json()["enabled"] is False
    assert [m["id"] for m in api(bob).get("/api/v1/judge-models").json()] == ["thinker"]
    assert api(root).delete("/api/v1/judge-models/thinker").status_code == 204
    assert api(root).get("/api/v1/judge-models/thinker").status_code == 404
    assert JudgeModelRegistration.objects.count() == 0


def test_only_a_superuser_writes_judge_models(
    api: Any, alice: User, dana: User, author_key: str, acme_key: str, fake_provider: FakeProvider, local_judge: Any
) -> None:
    doc = fake_provider.registration("mine")
    for writer in (api(alice), api(dana), api(author_key), api(acme_key)):
        assert writer.post("/api/v1/judge-models", data=doc, format="json").status_code == 403
        assert writer.put("/api/v1/judge-models/local", data=local_judge, format="json").status_code == 403
        assert writer.delete("/api/v1/judge-models/local").status_code == 403
    assert api().get("/api/v1/judge-models").status_code in (401, 403)
    assert api(author_key).get("/api/v1/judge-models").status_code == 200


# ------------------------------------------------------------------ CSV export


def test_the_csv_export_streams_the_filtered_entries(
    api: Any, acme_key: str, fake_provider: FakeProvider, local_judge: Any, judge_guardrail: Any, monkeypatch: Any
) -> None:
    monkeypatch.setattr("traces.judge.ledger.CSV_CHUNK", 1)  # one row per query: the keyset walk
    fake_provider.script(
        Answer('{"verdict": "FAIL", "reason": "=HYPERLINK(\\"x\\")"}', 10, 2), Answer('{"verdict": "PASS"}', 20, 3)
    )
    client = api(acme_key)
    evaluate(client, "csv-1")
    evaluate(client, "csv-2")
    response = client.get("/api/v1/ledger/entries.csv?guardrail=no-refund-promises")
    assert response.status_code == 200 and response["Content-Type"].startswith("text/csv")
    rows = list(csv.DictReader(io.StringIO(b"".join(response.streaming_content).decode())))
    assert [row["trace"] for row in rows] == ["csv-2", "csv-1"]
    assert rows[1]["costUsd"] == str(cost(10, 2).normalize())
    assert rows[1]["reason"].startswith("'=")  # no formula in a spreadsheet
    none = client.get("/api/v1/ledger/entries.csv?guardrail=another")
    assert b"".join(none.streaming_content).decode().count("\n") == 1


# ------------------------------------------------------------------ the estimate


def test_the_estimate_counts_calls_minus_cache_hits_at_the_routed_price(
    api: Any,
    acme: Tenant,
    acme_key: str,
    alice: User,
    fake_provider: FakeProvider,
    local_judge: Any,
    judge_guardrail: Any,
    halt_guardrail: Any,
) -> None:
    client = api(acme_key)
    # No refund tool call: the halt guardrail passes and the stored trace keeps its output.
    client.post(
        "/api/v1/traces", data={"traces": [make_trace(f"e-{n}", toolCalls=[]) for n in range(4)]}, format="json"
    )
    judged = evaluate(client, "e-judged", toolCalls=[])  # judged once: cached for the run
    assert judge_result(judged)["status"] == "pass"
    estimate = client.get("/api/v1/evaluations/estimate").json()
    assert estimate["tenant"] == "acme" and estimate["traces"] == 5
    assert (estimate["calls"], estimate["cached"]) == (4, 1)
    assert estimate["models"] == {"no-refund-promises": "local"} and estimate["errors"] == {}
    assert Decimal(estimate["costUsd"]) > 0 and estimate["extrapolated"] is False
    narrowed = api(alice).get("/api/v1/evaluations/estimate?tenant=acme&guardrails=no-refunds")
    assert narrowed.json()["calls"] == 0
    sampled = estimate_run(
        [g.guardrail for g in enforced_guardrails()], RunTrace.objects.filter(tenant=acme), acme, sample=2
    )
    assert sampled["sampled"] == 2 and sampled["extrapolated"] is True
    assert sampled["calls"] + sampled["cached"] == 5
    ghost = client.get("/api/v1/evaluations/estimate?guardrails=ghost,no-refund-promises").json()
    assert ghost["errors"] == {"ghost": "no enabled guardrail has this id"} and ghost["calls"] == 4


def test_the_estimate_says_why_a_guardrail_has_no_judge(api: Any, acme_key: str, judge_guardrail: Any) -> None:
    estimate = api(acme_key).get("/api/v1/evaluations/estimate").json()
    assert estimate["errors"] == {"no-refund-promises": "no judge model is registered"}


# ------------------------------------------------------------------ charlie sees nothing


def test_charlie_sees_nothing_of_acmes_judging(
    api: Any,
    acme_key: str,
    charlie: User,
    charlie_key: str,
    fake_provider: FakeProvider,
    local_judge: Any,
    judge_guardrail: Any,
    globex: Tenant,
) -> None:
    evaluate(api(acme_key), "secret-turn")
    assert JudgeLedgerEntry.objects.count() == 1
    for outsider in (api(charlie), api(charlie_key)):
        assert outsider.get("/api/v1/ledger/entries").json()["results"] == []
        assert outsider.get("/api/v1/ledger/entries?tenant=acme").json()["results"] == []
        assert outsider.get("/api/v1/ledger?group_by=tenant").json()["groups"] == []
        assert outsider.get("/api/v1/ledger?tenant=acme").json()["groups"][0]["calls"] == 0
        csv_body = b"".join(outsider.get("/api/v1/ledger/entries.csv").streaming_content).decode()
        assert "secret-turn" not in csv_body and csv_body.count("\n") == 1
        assert outsider.get("/api/v1/tenants/acme/judge-policy").status_code == 404
        assert (
            outsider.put("/api/v1/tenants/acme/judge-policy", data={"allowedModels": []}, format="json").status_code
            == 404
        )
        assert outsider.get("/api/v1/evaluations/estimate?tenant=acme").status_code == 404
        own = outsider.get("/api/v1/evaluations/estimate").json()
        assert own["tenant"] == "globex" and own["traces"] == 0
        assert (
            outsider.post("/api/v1/judge-models", data=fake_provider.registration("c"), format="json").status_code
            == 403
        )
        assert outsider.delete("/api/v1/judge-models/local").status_code == 403
    # A key of another tenant naming acme is refused, and nothing is judged or charged.
    assert ApiKey.objects.filter(tenant=globex).exists()
    refused = api(charlie_key).post("/api/v1/evaluate", data=make_trace("x", tenant="acme"), format="json")
    assert refused.status_code == 403 and JudgeLedgerEntry.objects.count() == 1


def test_the_new_run_page_shows_the_judge_estimate(
    api: Any, acme: Tenant, acme_key: str, alice: User, local_judge: Any, judge_guardrail: Any, halt_guardrail: Any
) -> None:
    api(acme_key).post(
        "/api/v1/traces", data={"traces": [make_trace(f"p-{n}", toolCalls=[]) for n in range(3)]}, format="json"
    )
    client = Client()
    client.force_login(alice)
    page = client.get("/evaluations/new/").content.decode()
    assert "Judge cost estimate" in page
    assert "no-refund-promises → local" in page
    without_judge = client.get("/evaluations/new/?guardrails=no-refunds&mode=ci").content.decode()
    assert "Judge cost estimate" not in without_judge
