"""The local judge provider other tests and the demo rely on, including its command line."""

import json
import socket
import subprocess
import sys
from pathlib import Path

import httpx
from openai import OpenAI
from openai.types.chat import ChatCompletionMessageParam

from tests.fakeproviders import Answer, FakeProvider

ROOT = Path(__file__).resolve().parents[2]


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def ask(base_url, path, body, **headers):
    return httpx.post(base_url + path, json=body, headers=headers, timeout=5)


def test_the_command_line_serves_both_protocols_until_stopped():
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "tests.fakeproviders", "--port", str(port)], cwd=ROOT, stdout=subprocess.PIPE, text=True
    )
    try:
        assert server.stdout.readline().strip().endswith(f"http://127.0.0.1:{port}/v1")
        body = {"model": "m", "messages": [{"role": "user", "content": "a turn"}]}
        openai = ask(f"http://127.0.0.1:{port}/v1", "/chat/completions", body).json()
        verdict = json.loads(openai["choices"][0]["message"]["content"])["verdict"]
        assert verdict in ("PASS", "FAIL") and openai["usage"]["prompt_tokens"] == 2
        anthropic = ask(
            f"http://127.0.0.1:{port}",
            "/v1/messages",
            {**body, "max_tokens": 256},
            **{"anthropic-version": "2023-06-01"},
        ).json()
        assert anthropic["type"] == "message" and anthropic["usage"]["input_tokens"] == 2
    finally:
        server.terminate()
        server.wait(timeout=5)


def test_its_own_judgement_is_deterministic_and_scores_when_asked():
    with FakeProvider() as provider:
        body = {
            "model": "m",
            "messages": [
                {"role": "system", "content": 'Answer {"score": <number from 0 to 1>}'},
                {"role": "user", "content": "a turn"},
            ],
        }
        first = ask(provider.openai_base_url, "/chat/completions", body).json()
        second = ask(provider.openai_base_url, "/chat/completions", body).json()
        assert first["choices"] == second["choices"]
        assert 0 <= json.loads(first["choices"][0]["message"]["content"])["score"] <= 1


def test_it_refuses_what_the_real_providers_refuse():
    with FakeProvider(api_key="k") as provider:
        body = {"model": "m", "messages": [{"role": "user", "content": "x"}], "max_tokens": 2304}
        unauthorised = ask(provider.anthropic_base_url, "/v1/messages", body)
        assert unauthorised.status_code == 401
        assert unauthorised.json()["error"]["type"] == "authentication_error"
        headers = {"x-api-key": "k", "anthropic-version": "2023-06-01"}
        low = {**body, "thinking": {"type": "enabled", "budget_tokens": 512}}
        assert ask(provider.anthropic_base_url, "/v1/messages", low, **headers).status_code == 400
        hot = {**body, "temperature": 0, "thinking": {"type": "enabled", "budget_tokens": 1024}}
        refused = ask(provider.anthropic_base_url, "/v1/messages", hot, **headers)
        assert "temperature" in refused.json()["error"]["message"]
        ok = {**body, "thinking": {"type": "enabled", "budget_tokens": 1024}}
        reply = ask(provider.anthropic_base_url, "/v1/messages", ok, **headers).json()
        assert [block["type"] for block in reply["content"]] == ["thinking", "text"]


def test_a_streamed_reply_is_read_by_the_openai_sdk_as_the_same_answer():
    """`stream: true` is answered as server-sent events the real client assembles: the text, a
    tool call's name and arguments (sent in pieces), the finish reason, and the usage it asked for."""
    with FakeProvider() as provider:
        provider.script(
            Answer("It was delivered yesterday."), Answer(None, tool_calls=(("lookup", {"order": "1234"}),))
        )
        client = OpenAI(base_url=provider.openai_base_url, api_key="sk-fake", max_retries=0)
        messages: list[ChatCompletionMessageParam] = [{"role": "user", "content": "Where is order 1234?"}]
        chunks = list(
            client.chat.completions.create(
                model="m", messages=messages, stream=True, stream_options={"include_usage": True}
            )
        )
        text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
        assert text == "It was delivered yesterday."
        assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "stop"
        assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens > 0
        called = list(client.chat.completions.create(model="m", messages=messages, stream=True))
        assert all(c.usage is None for c in called)  # usage only when asked for
        deltas = [d for c in called for d in (c.choices[0].delta.tool_calls or [])]
        assert deltas[0].function.name == "lookup"
        assert json.loads("".join(d.function.arguments or "" for d in deltas)) == {"order": "1234"}
        assert called[-1].choices[0].finish_reason == "tool_calls"


def test_a_model_is_scripted_over_http_ahead_of_the_shared_script():
    """The TypeScript tests' way: `POST /fake/script` queues a model's replies, `GET /fake/requests`
    reads what that model was asked; other models get the shared script (or the own judgement)."""
    with FakeProvider() as provider:
        base = provider.anthropic_base_url
        steps = [{"text": None, "toolCalls": [["lookup", {"order": "1"}]]}, {"text": "done"}]
        assert ask(base, "/fake/script", {"model": "agent-1", "steps": steps}).json() == {
            "model": "agent-1",
            "queued": 2,
        }
        assert ask(base, "/fake/script", {"model": "agent-1", "steps": "no"}).status_code == 400
        provider.script(Answer("shared"))
        body = {"messages": [{"role": "user", "content": "hi"}]}
        first = ask(base, "/v1/chat/completions", {**body, "model": "agent-1"}).json()["choices"][0]
        assert first["finish_reason"] == "tool_calls"
        assert first["message"]["tool_calls"][0]["function"]["name"] == "lookup"
        assert (
            ask(base, "/v1/chat/completions", {**body, "model": "other"}).json()["choices"][0]["message"]["content"]
            == "shared"
        )
        second = ask(base, "/v1/chat/completions", {**body, "model": "agent-1"}).json()["choices"][0]
        assert second["message"]["content"] == "done"
        asked = httpx.get(base + "/fake/requests", params={"model": "agent-1"}, timeout=5).json()
        assert [request["model"] for request in asked] == ["agent-1", "agent-1"]
