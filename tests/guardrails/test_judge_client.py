"""Judge calls over a real socket to a local server speaking each provider's protocol."""

import time
from decimal import Decimal
from email.utils import formatdate

import httpx
import pytest

from guardrails.engine.judge import JudgeModel, RetryPolicy, build_prompt, call_judge
from tests.fakeproviders import Answer, Fault, Hangup, Raw

PROMPT = build_prompt("Never promise a refund.", "pass-fail", {"output": "No refunds, sorry."})
FAST = RetryPolicy(max_attempts=4, base_delay_s=0.01, max_delay_s=0.05)


@pytest.fixture
def http():
    with httpx.Client() as client:
        yield client


def judge(fake_provider, id="judge", provider="openai", **fields):
    return JudgeModel.from_dict(fake_provider.registration(id, provider, **fields))


def call(model, http, *, scale="pass-fail", time_limit=5.0, **kwargs):
    deadline = time.monotonic() + time_limit
    return call_judge(model, PROMPT, http=http, deadline=deadline, scale=scale, retry=FAST, **kwargs)


def test_openai_request_body_of_a_plain_model(fake_provider, http):
    fake_provider.script(Answer('{"verdict": "PASS", "reason": "declined politely"}'))
    result = call(judge(fake_provider), http)
    assert result.outcome.verdict == "PASS"
    [request] = fake_provider.requests
    assert request.path == "/v1/chat/completions"
    assert request.body["model"] == "fake-openai-judge"
    assert request.body["max_completion_tokens"] == 256
    assert request.body["temperature"] == 0
    assert "reasoning_effort" not in request.body and "max_tokens" not in request.body
    assert [m["role"] for m in request.body["messages"]] == ["system", "user"]
    assert request.body["messages"][0]["content"] == PROMPT.system
    assert "authorization" not in request.headers


def test_openai_thinking_model_gets_its_lowest_effort_and_room_to_think(fake_provider, http):
    model = judge(fake_provider, model="fake-reasoner", thinking={"effort": "minimal"}, sampling=False)
    result = call(model, http)
    assert result.ok, result.error
    body = fake_provider.requests[0].body
    assert body["max_completion_tokens"] == 256 + 2048
    assert body["reasoning_effort"] == "minimal"
    assert "temperature" not in body


def test_a_model_without_sampling_is_sent_no_temperature(fake_provider, http):
    assert call(judge(fake_provider, model="fake-reasoner", sampling=False), http).ok
    assert "temperature" not in fake_provider.requests[0].body


def test_anthropic_request_body_and_headers(fake_provider, http, monkeypatch):
    monkeypatch.setenv("FAKE_ANTHROPIC_KEY", "sk-ant-test")
    fake_provider.api_key = "sk-ant-test"
    model = judge(fake_provider, provider="anthropic", apiKeyEnv="FAKE_ANTHROPIC_KEY")
    fake_provider.script(Answer('{"verdict": "FAIL", "reason": "promised a refund"}'))
    result = call(model, http)
    assert result.outcome.verdict == "FAIL" and result.outcome.reason == "promised a refund"
    request = fake_provider.requests[0]
    assert request.path == "/v1/messages"
    assert request.headers["x-api-key"] == "sk-ant-test"
    assert request.headers["anthropic-version"] == "2023-06-01"
    assert request.body["max_tokens"] == 256
    assert request.body["temperature"] == 0
    assert request.body["system"] == PROMPT.system
    assert request.body["messages"] == [{"role": "user", "content": PROMPT.user}]
    assert "thinking" not in request.body
    assert "sk-ant-test" not in repr(result)


def test_anthropic_thinking_model_gets_its_minimum_budget_and_no_temperature(fake_provider, http):
    model = judge(fake_provider, provider="anthropic", thinking={"budgetTokens": 1024})
    fake_provider.script(Answer('{"verdict": "PASS", "reason": "fine"}', thinking="The agent declined politely."))
    result = call(model, http)
    assert result.outcome.verdict == "PASS" and result.outcome.reason == "fine"
    body = fake_provider.requests[0].body
    assert body["max_tokens"] == 2304
    assert body["thinking"] == {"type": "enabled", "budget_tokens": 1024}
    assert "temperature" not in body


def test_the_key_comes_from_the_environment_at_call_time(fake_provider, http, monkeypatch):
    fake_provider.api_key = "sk-one"
    model = judge(fake_provider, apiKeyEnv="FAKE_OPENAI_KEY")
    monkeypatch.delenv("FAKE_OPENAI_KEY", raising=False)
    missing = call(model, http)
    assert missing.error == (
        "the environment variable FAKE_OPENAI_KEY holding judge model 'judge''s API key is not set"
    )
    assert fake_provider.requests == [] and missing.attempts == 0
    monkeypatch.setenv("FAKE_OPENAI_KEY", "sk-one")
    assert call(model, http).ok
    assert fake_provider.requests[0].headers["authorization"] == "Bearer sk-one"
    monkeypatch.setenv("FAKE_OPENAI_KEY", "sk-wrong")
    refused = call(model, http)
    assert refused.http_status == 401 and refused.attempts == 1
    assert "HTTP 401" in refused.error and "sk-wrong" not in refused.error


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_usage_and_cost_as_the_provider_reported_them(fake_provider, http, provider):
    model = judge(fake_provider, provider=provider, pricing={"inputUsdPerMTok": "0.15", "outputUsdPerMTok": 0.6})
    fake_provider.script(Answer('{"verdict": "PASS"}', input_tokens=1234, output_tokens=56))
    result = call(model, http)
    assert (result.input_tokens, result.output_tokens) == (1234, 56)
    assert result.cost_usd == Decimal("0.0002187")
    assert result.billed and result.http_status == 200 and result.latency_ms >= 0


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_a_cut_off_answer_is_an_error_but_billed(fake_provider, http, provider):
    fake_provider.script(Answer('{"verdict": "PA', cut_off=True, input_tokens=900, output_tokens=256))
    result = call(judge(fake_provider, provider=provider), http)
    assert result.outcome is None
    assert result.error.startswith("the judge's answer was cut off by the token limit")
    assert result.billed and result.output_tokens == 256
    assert result.cost_usd == Decimal("0.0007696")


def test_garbage_is_an_error_but_billed(fake_provider, http):
    fake_provider.script(Answer("I would rather not say.", input_tokens=10, output_tokens=7))
    result = call(judge(fake_provider), http)
    assert result.outcome is None and "neither JSON nor PASS/FAIL" in result.error
    assert result.billed and result.attempts == 1


def test_an_answer_without_usage_is_not_billed(fake_provider, http):
    fake_provider.script(Answer('{"verdict": "PASS"}', usage=False))
    result = call(judge(fake_provider), http)
    assert result.ok and not result.billed
    assert result.input_tokens is None and result.cost_usd == Decimal(0)


def test_a_reply_that_is_not_json_is_an_error(fake_provider, http):
    fake_provider.script(Raw(200, b"<html>gateway</html>", "text/html"))
    result = call(judge(fake_provider), http)
    assert result.error == "the provider's reply is not a JSON object" and not result.billed


def test_429_waits_what_retry_after_asks(fake_provider, http):
    waits = []
    fake_provider.script(Fault(429, "slow down", retry_after="1"), Answer("PASS"))
    result = call(judge(fake_provider), http, sleep=lambda s: waits.append(s))
    assert result.ok and result.attempts == 2 and len(fake_provider.requests) == 2
    assert waits == [1.0]


def test_retry_after_as_an_http_date(fake_provider, http):
    waits = []
    when = formatdate(time.time() + 3, usegmt=True)
    fake_provider.script(Fault(429, retry_after=when), Answer("PASS"))
    assert call(judge(fake_provider), http, sleep=lambda s: waits.append(s)).ok
    assert 1.0 < waits[0] <= 3.0


def test_a_retry_after_past_the_deadline_is_not_waited_for(fake_provider, http):
    fake_provider.script(Fault(429, "slow down", retry_after="30"))
    waits = []
    result = call(judge(fake_provider), http, time_limit=2.0, sleep=lambda s: waits.append(s))
    assert waits == [] and len(fake_provider.requests) == 1  # neither waited nor tried again
    assert result.error == (
        "the judge provider answered HTTP 429: slow down; waiting 30.0s to try again "
        "would pass the evaluation's time limit"
    )
    assert result.http_status == 429 and not result.billed


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_5xx_is_retried_with_backoff(fake_provider, http, provider):
    waits = []
    fake_provider.script(Fault(500), Fault(529, "overloaded"), Answer("FAIL: invented a policy"))
    result = call(judge(fake_provider, provider=provider), http, sleep=lambda s: waits.append(s), rng=lambda: 1.0)
    assert result.outcome.verdict == "FAIL" and result.outcome.reason == "invented a policy"
    assert result.attempts == 3 and result.http_status == 200
    assert waits == [0.01, 0.02]


def test_backoff_is_exponential_with_jitter():
    policy = RetryPolicy(base_delay_s=1, max_delay_s=3)
    assert [policy.backoff(n, lambda: 0.0) for n in (1, 2, 3)] == [0.5, 1.0, 1.5]
    assert [policy.backoff(n, lambda: 1.0) for n in (1, 2, 3)] == [1.0, 2.0, 3.0]


def test_it_gives_up_after_the_last_attempt(fake_provider, http):
    fake_provider.script(*[Fault(503, "unavailable")] * 4)
    result = call(judge(fake_provider), http)
    assert result.error == "the judge provider answered HTTP 503: unavailable (gave up after 4 attempts)"
    assert len(fake_provider.requests) == 4


def test_a_client_error_is_not_retried(fake_provider, http):
    fake_provider.script(Fault(400, "model not found"))
    result = call(judge(fake_provider), http)
    assert result.error == "the judge provider answered HTTP 400: model not found"
    assert result.attempts == 1


def test_a_provider_refusing_the_request_body_is_an_error(fake_provider, http):
    # A reasoning model registered as sampling would be sent a temperature: the provider says no.
    result = call(judge(fake_provider, model="fake-reasoner"), http)
    assert result.http_status == 400 and "temperature" in result.error


def test_a_slow_provider_times_out_within_the_deadline(fake_provider, http):
    fake_provider.script(Answer("PASS", delay_s=1.0))
    result = call(judge(fake_provider), http, time_limit=0.4)
    # The read timeout and the deadline are the same instant: on a busy machine either may
    # be the one that ends the call, and both mean it was cut off at the deadline.
    assert result.outcome is None and ("timed out" in result.error or "time limit" in result.error)
    assert result.latency_ms < 900


def test_a_timed_out_attempt_is_retried_within_the_deadline(fake_provider, http):
    fake_provider.script(Answer("FAIL", delay_s=1.0), Answer("PASS: fine"))
    patient = RetryPolicy(base_delay_s=0.01, attempt_timeout_s=0.3)
    deadline = time.monotonic() + 5
    result = call_judge(judge(fake_provider), PROMPT, http=http, deadline=deadline, retry=patient)
    assert result.outcome.verdict == "PASS" and result.attempts == 2


def test_a_dropped_connection_is_retried(fake_provider, http):
    fake_provider.script(Hangup(), Answer("PASS"))
    result = call(judge(fake_provider), http)
    assert result.ok and result.attempts == 2


def test_a_closed_port_is_an_error_within_the_deadline(fake_provider, http):
    model = judge(fake_provider)
    fake_provider.stop()
    result = call(model, http, time_limit=1.0)
    assert result.outcome is None and "could not reach the judge provider" in result.error
