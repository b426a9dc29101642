"""The judge under hostile conditions, console side: dripping providers and the evaluation's
deadline, identical judgements in flight, the cache key, keys echoed in errors, the CI export,
disabled registrations and thinking budgets."""

from __future__ import annotations

import csv
import io
import json
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test import Client

from guardrails.models import JudgeClaim
from guardrails.services import Author, save_guardrail
from tests.conftest import guardrail_ci_files, make_trace, run_guardrail_ci_captured, together
from tests.fakeproviders import Answer, Drip, FakeProvider, Fault
from traces.judge.services import ConsoleJudgeServices
from traces.models import EvaluationResult, JudgeLedgerEntry, RunTrace

from .test_judge_ledger import judge_document, judge_result


def register(api: Any, root: User, doc: dict[str, Any]) -> dict[str, Any]:
    response = api(root).post("/api/v1/judge-models", data=doc, format="json")
    assert response.status_code == 201, response.json()
    return response.json()


def evaluate(client: Any, trace_id: str, *, store: bool = True) -> dict[str, Any]:
    url = "/api/v1/evaluate" + ("" if store else "?store=false")
    response = client.post(url, data=make_trace(trace_id), format="json")
    assert response.status_code == 200, response.json()
    return response.json()


# ------------------------------------------------------------------ deadlines


def test_a_dripping_provider_gives_error_at_the_call_limit_and_its_late_answer_never_counts(
    api: Any, acme_key: str, root: User, fake_provider: FakeProvider, settings: Any
) -> None:
    settings.KINDGI_JUDGE_CALL_LIMIT_S = 1
    register(api, root, fake_provider.registration("local"))
    save_guardrail(judge_document(), Author(user=None, label="fixture"))
    fake_provider.script(Drip(Answer('{"verdict": "FAIL", "reason": "late"}'), chunk=4, interval_s=0.2))
    started = time.monotonic()
    result = judge_result(evaluate(api(acme_key), "drip"))
    assert time.monotonic() - started < 3.0
    assert result["status"] == "error" and "time limit" in result["reason"]
    time.sleep(0.5)  # the late answer, had it been read, would be a FAIL by now
    assert JudgeLedgerEntry.objects.get().outcome == "error"


def test_guardrails_after_the_evaluations_deadline_are_errors_with_reason_deadline(
    api: Any, acme_key: str, root: User, fake_provider: FakeProvider, settings: Any
) -> None:
    settings.KINDGI_EVALUATE_TIME_LIMIT_S = 1
    register(api, root, fake_provider.registration("local"))
    for name in ("a-slow-judge", "b-after"):
        save_guardrail(judge_document(name), Author(user=None, label="fixture"))
    save_guardrail(
        {
            "id": "c-zero-llm",
            "name": "No refunds",
            "kind": "zero-llm",
            "check": "never-call-tool",
            "config": {"tools": ["wire_money"]},
            "action": {"on-violation": "flag"},
            "severity": "warn",
        },
        Author(user=None, label="fixture"),
    )
    fake_provider.script(Answer('{"verdict": "PASS"}', delay_s=3))
    started = time.monotonic()
    results = {r["guardrail"]: r for r in evaluate(api(acme_key), "slow", store=False)["results"]}
    assert time.monotonic() - started < 3.0
    assert results["a-slow-judge"]["status"] == "error"
    assert (results["b-after"]["status"], results["b-after"]["reason"]) == ("error", "deadline")
    assert (results["c-zero-llm"]["status"], results["c-zero-llm"]["reason"]) == ("error", "deadline")


def test_evaluate_without_storing_applies_the_trace_size_limit(api: Any, acme_key: str, settings: Any) -> None:
    settings.KINDGI_MAX_TRACE_BYTES = 4096
    big = make_trace("big", output="x" * 5000)
    for url in ("/api/v1/evaluate?store=false", "/api/v1/evaluate"):
        response = api(acme_key).post(url, data=big, format="json")
        assert response.status_code == 400, url
        assert "over the limit of 4096" in response.json()["errors"][0]["message"]


# ------------------------------------------------------------------ one paid call per judgement


@pytest.mark.django_db(transaction=True)
def test_two_concurrent_evaluations_of_the_same_judgement_pay_for_one_call(
    api: Any, acme_key: str, root: User, fake_provider: FakeProvider
) -> None:
    register(api, root, fake_provider.registration("local"))
    save_guardrail(judge_document(), Author(user=None, label="fixture"))
    fake_provider.script(Answer('{"verdict": "FAIL", "reason": "promises"}', 500, 20, delay_s=0.6))
    start = threading.Barrier(2)
    answers: list[dict[str, Any]] = []

    def send() -> None:
        try:
            start.wait()
            answers.append(judge_result(evaluate(api(acme_key), "same", store=False)))
        finally:
            connection.close()

    together(send)
    assert len(fake_provider.requests) == 1
    assert sorted(a["status"] for a in answers) == ["fail", "fail"]
    assert sorted(a["details"]["cached"] for a in answers) == [False, True]
    entries = JudgeLedgerEntry.objects.all()
    assert sorted((e.billed, e.cache_hit) for e in entries) == [(False, True), (True, False)]
    assert not JudgeClaim.objects.exists()


def test_a_lapsed_claim_is_taken_over_and_a_live_one_is_not(db: Any) -> None:
    holder, other = ConsoleJudgeServices(), ConsoleJudgeServices()
    assert holder.claim("k" * 64, time.monotonic() + 30)
    assert not other.claim("k" * 64, time.monotonic() + 30)
    other.release("k" * 64)  # not its claim: nothing happens
    assert JudgeClaim.objects.count() == 1
    holder.release("k" * 64)
    assert other.claim("k" * 64, time.monotonic() - 1)  # lapses at once
    assert other.claim("j" * 64, time.monotonic() - 1)
    assert holder.claim("k" * 64, time.monotonic() + 30)  # the lapsed claim taken over
    assert ConsoleJudgeServices().claim("i" * 64, time.monotonic() + 30)
    # An evaluation's first claim clears the lapsed ones.
    assert sorted(JudgeClaim.objects.values_list("key", flat=True)) == ["i" * 64, "k" * 64]


def test_changing_a_registrations_model_is_not_answered_from_the_old_models_cache(
    api: Any, acme_key: str, root: User, fake_provider: FakeProvider
) -> None:
    doc = register(api, root, fake_provider.registration("local"))
    save_guardrail(judge_document(), Author(user=None, label="fixture"))
    client = api(acme_key)
    assert judge_result(evaluate(client, "t", store=False))["details"]["cached"] is False
    assert judge_result(evaluate(client, "t", store=False))["details"]["cached"] is True
    changed = {**doc, "model": "another-judge"}
    changed.pop("apiKeySet")
    assert api(root).put("/api/v1/judge-models/local", data=changed, format="json").status_code == 200
    again = judge_result(evaluate(client, "t", store=False))
    assert again["details"]["cached"] is False
    assert [r.body["model"] for r in fake_provider.requests] == ["fake-openai-judge", "another-judge"]


# ------------------------------------------------------------------ secrets echoed back


def test_a_provider_error_echoing_a_key_is_redacted_everywhere_it_is_kept_or_shown(
    api: Any, acme_key: str, root: User, bob: User, monkeypatch: Any, settings: Any
) -> None:
    key, other, check_secret = "sk-live-echo-0123456789", "sk-other-model-987654321", "tok-check-secret-55555"
    monkeypatch.setenv("ECHO_KEY", key)
    monkeypatch.setenv("OTHER_KEY", other)
    monkeypatch.setenv("CHECK_TOKEN", check_secret)
    settings.KINDGI_SECRETS = ["CHECK_TOKEN"]
    with FakeProvider(api_key=key) as provider:
        register(api, root, provider.registration("echo", apiKeyEnv="ECHO_KEY"))
        register(api, root, provider.registration("other", apiKeyEnv="OTHER_KEY", enabled=False))
        save_guardrail(judge_document(), Author(user=None, label="fixture"))
        provider.script(Fault(400, f"Incorrect API key {key}; also {other} and {check_secret}"))
        answer = evaluate(api(acme_key), "echoed")
    shown = [
        json.dumps(answer),
        json.dumps(api(acme_key).get("/api/v1/ledger/entries").json()),
        b"".join(api(acme_key).get("/api/v1/ledger/entries.csv").streaming_content).decode(),
        json.dumps(api(acme_key).get("/api/v1/traces/echoed").json()),
        str(list(JudgeLedgerEntry.objects.values_list("error", flat=True))),
        str(list(EvaluationResult.objects.values_list("reason", "details"))),
    ]
    signed_in = Client()
    signed_in.force_login(bob)
    stored = RunTrace.objects.get(trace_id="echoed")
    shown.append(signed_in.get(f"/traces/{stored.pk}/").content.decode())
    for text in shown:
        assert key not in text and other not in text and check_secret not in text
    assert "[redacted]" in judge_result(answer)["reason"]
    assert "[redacted]" in JudgeLedgerEntry.objects.get().error
    rows = list(csv.DictReader(io.StringIO(shown[2])))
    assert "[redacted]" in shown[-1]  # the page shows the result's reason
    assert rows and "[redacted]" in rows[0]["error"]


# ------------------------------------------------------------------ registrations


def test_an_anthropic_budget_under_1024_is_a_400_with_its_pointer(
    api: Any, root: User, fake_provider: FakeProvider
) -> None:
    doc = fake_provider.registration("claude", "anthropic", thinking={"budgetTokens": 500}, sampling=False)
    response = api(root).post("/api/v1/judge-models", data=doc, format="json")
    assert response.status_code == 400
    assert [e["path"] for e in response.json()["errors"]] == ["/thinking/budgetTokens"]


def test_the_registration_page_shows_the_budget_minimum_on_its_field(root: User) -> None:
    from tests.conftest import signed_in
    from tests.traces.test_judge_pages import URL, form_data

    response = signed_in(root).post(
        URL, form_data(provider="anthropic", thinking="budgetTokens", thinking_value="500", sampling="")
    )
    assert response.status_code == 400
    assert "1024" in response.context["form"].errors["thinking_value"][0]


def test_a_guardrail_pinned_to_a_disabled_registration_is_told_it_is_disabled(
    api: Any, acme_key: str, root: User, fake_provider: FakeProvider
) -> None:
    register(api, root, {**fake_provider.registration("off"), "enabled": False})
    save_guardrail(judge_document(judgeCapabilities={"model": "off"}), Author(user=None, label="fixture"))
    result = judge_result(evaluate(api(acme_key), "pinned", store=False))
    assert result["status"] == "error"
    assert "'off' named by judgeCapabilities.model is disabled" in result["reason"]
    assert not fake_provider.requests


def test_ci_takes_the_judge_models_answer_as_it_is_and_routes_as_production(
    api: Any, acme_key: str, root: User, tmp_path: Path
) -> None:
    with FakeProvider() as provider:
        cheap = provider.registration(
            "cheap-off", model="model-off", pricing={"inputUsdPerMTok": "0.01", "outputUsdPerMTok": "0.01"}
        )
        register(api, root, {**cheap, "enabled": False})
        register(api, root, provider.registration("on", model="model-on"))
        exported = api(acme_key).get("/api/v1/judge-models")
        assert exported.status_code == 200
        argv = guardrail_ci_files(tmp_path, judge_document(), exported.content, [make_trace("ci")])
        save_guardrail(judge_document(), Author(user=None, label="fixture"))
        production = judge_result(evaluate(api(acme_key), "prod", store=False))
        status, out, err = run_guardrail_ci_captured(argv)
        asked = [request.body["model"] for request in provider.requests]
    assert status in (0, 1), err
    assert json.loads(out)["results"][0]["status"] in ("pass", "fail")
    assert production["details"]["model"] == "on"
    assert asked == ["model-on", "model-on"]
