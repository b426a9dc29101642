"""The local judge provider other tests and the demo rely on, including its command line."""

import json
import socket
import subprocess
import sys
from pathlib import Path

import httpx

from tests.fakeproviders import FakeProvider

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
