"""The judge's circuit breaker, console side: verdicts stop calling a provider that is down,
every evaluation path shares the circuit through the cache, the half-open probe closes it,
and the judge models page and API show its state."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client

from guardrails.engine.judge import JudgeModel
from tests.conftest import make_trace
from tests.fakeproviders import Answer, FakeProvider, Fault
from tests.traces.workers import free_port, wait_for
from traces.judge.services import console_judge_services
from traces.models import JudgeLedgerEntry

from .test_judge_ledger import judge_guardrail, judge_result

__all__ = ["judge_guardrail"]  # a fixture


@pytest.fixture(autouse=True)
def _three_failures_open_a_circuit(settings: Any) -> None:
    settings.KINDGI_JUDGE_CIRCUIT_FAILURES = 3
    settings.KINDGI_JUDGE_CIRCUIT_COOLDOWN_S = 30


def register(api: Any, root: User, doc: dict[str, Any]) -> dict[str, Any]:
    response = api(root).post("/api/v1/judge-models", data=doc, format="json")
    assert response.status_code == 201, response.json()
    return response.json()


def verdict(client: Any, trace_id: str) -> dict[str, Any]:
    response = client.post("/api/v1/evaluate", data=make_trace(trace_id), format="json")
    assert response.status_code == 200, response.json()
    return judge_result(response.json())


def circuit(api: Any, who: Any, model_id: str = "local") -> dict[str, Any]:
    response = api(who).get(f"/api/v1/judge-models/{model_id}")
    assert response.status_code == 200, response.json()
    return dict(response.json()["circuit"])


def test_verdicts_stop_calling_a_provider_that_answers_500(
    api: Any, acme_key: str, root: User, fake_provider: FakeProvider, judge_guardrail: Any
) -> None:
    register(api, root, fake_provider.registration("local"))
    fake_provider.script(Fault(500), Fault(503), Fault(500))
    first = verdict(api(acme_key), "t-0")
    assert first["status"] == "error"
    assert len(fake_provider.requests) == 3

    for n in range(1, 11):
        result = verdict(api(acme_key), f"t-{n}")
        assert result["status"] == "error"
        assert result["reason"].startswith("judge call failed: provider unavailable (3 failures in a row")
        assert " since " in result["reason"]
    assert len(fake_provider.requests) == 3  # not called while the circuit is open
    assert JudgeLedgerEntry.objects.count() == 1  # refused calls reached no provider: nothing to charge


def test_a_refused_connection_opens_it_and_the_api_and_page_show_it(
    api: Any, acme_key: str, root: User, alice: User, judge_guardrail: Any
) -> None:
    port = free_port()
    doc = {
        "id": "local",
        "provider": "openai",
        "model": "fake-openai-judge",
        "baseUrl": f"http://127.0.0.1:{port}/v1",
        "apiKeyEnv": None,
        "pricing": {"inputUsdPerMTok": "1", "outputUsdPerMTok": "2"},
        "capabilities": ["json"],
    }
    assert register(api, root, doc)["circuit"]["state"] == "closed"
    verdict(api(acme_key), "t-0")

    state = circuit(api, acme_key)
    assert state["state"] == "open"
    assert state["failures"] == 3
    assert state["since"] is not None and state["retryAt"] > state["since"]
    assert "could not reach the judge provider (ConnectError)" in state["lastError"]
    listed = api(acme_key).get("/api/v1/judge-models").json()
    assert [entry["circuit"]["state"] for entry in listed] == ["open"]

    client = Client()
    client.force_login(alice)
    page = client.get("/judge-models/").content.decode()
    assert "unavailable" in page and "calls fail at once" in page


def test_a_run_shares_the_circuit_the_runtime_path_opened(
    api: Any, acme_key: str, acme: Any, root: User, fake_provider: FakeProvider, judge_guardrail: Any
) -> None:
    doc = register(api, root, fake_provider.registration("local"))
    fake_provider.script(Fault(500), Fault(500), Fault(500))
    verdict(api(acme_key), "t-0")

    run_services = console_judge_services(acme, evaluation=object())
    assert run_services.circuit is not None
    model = JudgeModel.from_dict({key: doc[key] for key in ("id", "provider", "model", "baseUrl", "pricing")})
    assert run_services.circuit.refusal(model) is not None


def test_after_the_cool_down_an_answered_probe_closes_it(
    api: Any, acme_key: str, root: User, fake_provider: FakeProvider, judge_guardrail: Any, settings: Any
) -> None:
    settings.KINDGI_JUDGE_CIRCUIT_COOLDOWN_S = 3  # longer than the retries' last backoff (at most 2 s)
    register(api, root, fake_provider.registration("local"))
    fake_provider.script(Fault(500), Fault(500), Fault(500))
    verdict(api(acme_key), "t-0")
    wait_for(lambda: circuit(api, acme_key)["state"] == "half-open", 10, "the cool-down to end")

    fake_provider.script(Answer('{"verdict": "PASS", "reason": "no promise"}'))
    assert verdict(api(acme_key), "t-1")["status"] == "pass"
    assert circuit(api, acme_key)["state"] == "closed"
    assert verdict(api(acme_key), "t-2")["status"] in ("pass", "fail")  # judged again
    assert len(fake_provider.requests) == 5


def test_a_circuit_is_read_only_and_a_registration_read_can_be_put_back(
    api: Any, root: User, fake_provider: FakeProvider
) -> None:
    read = register(api, root, fake_provider.registration("local"))
    response = api(root).put("/api/v1/judge-models/local", data=read, format="json")
    assert response.status_code == 200, response.json()


def test_without_a_key_nothing_of_a_circuit_is_shown(api: Any, root: User, fake_provider: FakeProvider) -> None:
    register(api, root, fake_provider.registration("local"))
    assert api().get("/api/v1/judge-models/local").status_code == 401


def test_a_run_with_its_judges_provider_down_ends_with_every_judge_result_an_error(
    api: Any, acme: Any, root: User, judge_guardrail: Any, django_capture_on_commit_callbacks: Any
) -> None:
    from tests.traces.test_worker_recovery import store_many
    from traces.models import Evaluation, EvaluationResult
    from traces.runs import evaluations

    doc = {
        "id": "local",
        "provider": "openai",
        "model": "fake-openai-judge",
        "baseUrl": f"http://127.0.0.1:{free_port()}/v1",
        "apiKeyEnv": None,
        "pricing": {"inputUsdPerMTok": "1", "outputUsdPerMTok": "2"},
        "capabilities": ["json"],
    }
    register(api, root, doc)
    store_many(acme, 300)
    with django_capture_on_commit_callbacks(execute=True):  # the run's tasks, sent at commit, run here
        run = evaluations.create_run(evaluations.RunRequest(tenant=acme, label="provider down"))

    run = Evaluation.objects.get(pk=run.pk)
    assert (run.status, run.done) == ("succeeded", 300)
    judged = EvaluationResult.objects.filter(evaluation=run, guardrail__guardrail_id="no-refund-promises")
    assert judged.count() == 300
    assert set(judged.values_list("status", flat=True)) == {"error"}
    reasons = list(judged.values_list("reason", flat=True))
    assert sum("provider unavailable" in reason for reason in reasons) >= 290
