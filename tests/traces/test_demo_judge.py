"""The demo's own judge: an OpenAI-protocol endpoint the console serves, so that the demo's
judge features work offline; `load_demo` registers its models there and `runconsole` points
them at its own address."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from django.test import Client

from guardrails.engine.judge.parsing import parse_answer
from guardrails.engine.judge.prompt import build_prompt
from guardrails.models import JudgeModelRegistration
from guardrails.services import Author, save_guardrail
from kindgi_console.management.commands.runconsole import console_url
from kindgi_console.tenancy.models import ApiKey
from tests.conftest import make_trace
from tests.traces.test_evaluations import run_for, store_traces
from traces import demo
from traces.demo.catalogue import DEMO_JUDGE_MODELS, EXTRA_GUARDRAILS, OLD_DEMO_JUDGE_BASE_URL
from traces.demo.judge_endpoint import judge
from traces.judge.registry import registration_doc, save_registration
from traces.models import EvaluationResult, JudgeLedgerEntry

TONE = next(doc for doc in EXTRA_GUARDRAILS if doc["id"] == "support-tone-judge")
CRITERIA = str(TONE["config"]["criteria"])


def completion(url: str, system: str, user: str) -> httpx.Response:
    body = {
        "model": "qwen2.5:7b-instruct",
        "messages": [{"role": "system", "content": system}, {"role": "user", "content": user}],
    }
    return httpx.post(f"{url}/demo-judge/v1/chat/completions", json=body, timeout=10)


def test_its_verdicts_are_what_a_judge_answers_and_the_same_each_time() -> None:
    markup = make_trace(output="Sure! <script>alert(1)</script>")
    plain = make_trace(output="Your refund for order 1234 is on its way.")
    for trace, verdict in ((markup, "FAIL"), (plain, "PASS")):
        prompt = build_prompt(CRITERIA, "pass-fail", trace)
        answer = judge(prompt.system, prompt.user)
        assert judge(prompt.system, prompt.user) == answer
        assert parse_answer(str(answer).replace("'", '"'), "pass-fail").verdict == verdict
    scored = build_prompt("Every claim is grounded.", "score", markup)
    outcome = judge(scored.system, scored.user)
    assert 0 <= outcome["score"] < 0.7 and outcome["reason"] == "the answer contains markup instead of a reply"


def test_it_is_a_404_when_the_setting_is_off(db: Any, settings: Any) -> None:
    settings.KINDGI_DEMO_JUDGE = False
    response = Client().post("/demo-judge/v1/chat/completions", "{}", content_type="application/json")
    assert response.status_code == 404


def test_a_bad_request_is_a_400_naming_the_field(db: Any, settings: Any) -> None:
    settings.KINDGI_DEMO_JUDGE = True
    client = Client()
    response = client.post("/demo-judge/v1/chat/completions", {"messages": "x"}, content_type="application/json")
    assert response.status_code == 400 and response.json()["error"]["message"].startswith("/messages")
    response = client.post("/demo-judge/v1/chat/completions", b"not json", content_type="application/json")
    assert response.status_code == 400


def test_runconsole_points_the_demo_models_at_its_own_address_and_leaves_others(db: Any) -> None:
    demo.ensure_judge_models()
    moved_away = {**DEMO_JUDGE_MODELS[2], "baseUrl": "https://judge.example.com/v1"}
    save_registration(moved_away)
    old = JudgeModelRegistration.objects.get(model_id=DEMO_JUDGE_MODELS[1]["id"])
    save_registration({**registration_doc(old, console_fields=False), "baseUrl": OLD_DEMO_JUDGE_BASE_URL})
    assert demo.point_judges_at(console_url("0.0.0.0:8123")) == ["demo-judge-fast", "demo-judge-small"]
    urls = dict(JudgeModelRegistration.objects.values_list("model_id", "base_url"))
    assert urls == {
        "demo-judge-small": "http://127.0.0.1:8123/demo-judge/v1",
        "demo-judge-fast": "http://127.0.0.1:8123/demo-judge/v1",
        "demo-judge-large": "https://judge.example.com/v1",
    }
    assert demo.point_judges_at("http://127.0.0.1:8123") == []


@pytest.mark.django_db(transaction=True)
def test_try_it_and_a_run_with_the_demo_judge_get_real_verdicts_over_a_socket(
    live_server: Any, settings: Any, acme: Any
) -> None:
    settings.KINDGI_DEMO_JUDGE = True
    demo.ensure_judge_models()
    assert len(demo.point_judges_at(live_server.url)) == 3
    answer = completion(live_server.url, "Criteria:\nbe kind\n\nThe user message", "hello")
    assert answer.status_code == 200 and answer.json()["usage"]["prompt_tokens"] > 0

    tried = httpx.post(
        f"{live_server.url}/api/v1/guardrails/try",
        json={"guardrail": TONE, "trace": make_trace(tenant="acme", agent="support-bot"), "mode": "ci"},
        headers={"Authorization": f"Bearer {ApiKey.issue(scopes=['author', 'read'], tenant=acme, name='k')[1]}"},
        timeout=60,
    )
    assert tried.status_code == 200, tried.text
    result = tried.json()["result"]
    assert result["status"] in {"pass", "fail"}, result

    save_guardrail(TONE, Author(user=None, label="fixture"))
    store_traces(acme, 6, agent="support-bot")
    run = run_for(acme)
    assert run.status == "succeeded", run.error
    statuses = set(EvaluationResult.objects.filter(evaluation=run).values_list("status", flat=True))
    assert statuses and statuses <= {"pass", "fail"}, statuses
    spent = JudgeLedgerEntry.objects.filter(evaluation=run, cache_hit=False)
    assert spent.count() == 6
    assert all(e.input_tokens and e.output_tokens and e.cost_usd > 0 for e in spent)
