"""The console keeps answering while the hostile pack runs in it: over real HTTP, then a
benign guardrail on the same server."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from django.test import override_settings

from guardrails import deployment
from tests.conftest import make_guardrail, make_trace

PACKS = ["tests.packs.hostile", "tests.packs.greetings"]
HOSTILE = [
    "kills-the-console",
    "setns-through-fork-exec",
    "setns-through-ctypes",
    "reads-parent-environ",
    "reads-console-memory",
    "runs-a-shell-as-root",
    "leaves-a-child-behind",
    "children-share-the-memory",
    "spins-after-its-verdict",
    "forges-an-early-verdict",
    "writes-to-dev-shm",
    "huge-reason",
    "huge-frame",
    "writes-to-stderr",
    "aborts",
]


@pytest.fixture
def console(live_server: Any) -> Iterator[str]:
    """The live server with the hostile pack loaded and a fresh sandbox pool."""
    with override_settings(KINDGI_CHECK_PACKS=PACKS):
        deployment._loaded.cache_clear()
        deployment.sandbox_pool.cache_clear()
        yield live_server.url
        deployment.sandbox_pool().shutdown()
        deployment.sandbox_pool.cache_clear()
        deployment._loaded.cache_clear()


def hostile(check: str, config: dict[str, Any]) -> dict[str, Any]:
    return make_guardrail(
        f"g-{check}",
        kind="zero-llm",
        check=f"hostile-{check}",
        config=config,
        sandbox="strict",
        limits={"memMB": 64, "cpuMs": 1000},
        network={"kind": "none"},
        action={"on-violation": "log-only"},
    )


def try_over_http(url: str, key: str, guardrail: dict[str, Any]) -> dict[str, Any]:
    response = httpx.post(
        f"{url}/api/v1/guardrails/try",
        json={"guardrail": guardrail, "trace": make_trace(tenant="acme"), "mode": "ci"},
        headers={"Authorization": f"Bearer {key}"},
        timeout=60,
    )
    assert response.status_code == 200, response.text
    result: dict[str, Any] = response.json()["result"]
    return result


@pytest.mark.django_db(transaction=True)
def test_the_console_keeps_answering_through_the_hostile_pack(console, author_key, listener):
    config = {
        "console_pid": os.getpid(),
        "port": listener.port,
        "mb": 2,
        "needle": f"acme-{uuid.uuid4().hex}",
        "marker": f"kindgi-{uuid.uuid4().hex}",
        "passed": True,
        "spin_s": 3.0,
    }
    for check in HOSTILE:
        result = try_over_http(console, author_key, hostile(check, config))
        assert not (result["reason"] or "").startswith("escaped"), (check, result)
        assert len(result["reason"] or "") <= 4096
    assert listener.connections == 0
    benign = make_guardrail("benign", kind="zero-llm", check="says-word", config={"word": "refunded"}, sandbox="strict")
    assert try_over_http(console, author_key, benign)["status"] == "pass"


@pytest.mark.django_db(transaction=True)
def test_one_tenants_trace_never_shows_in_anothers_result_through_the_api(console, author_key):
    canary = f"acme-only-{uuid.uuid4().hex}"
    guardrail = hostile("remembers-traces", {})

    def evaluate(tenant: str, output: str) -> dict[str, Any]:
        response = httpx.post(
            f"{console}/api/v1/guardrails/try",
            json={"guardrail": guardrail, "trace": make_trace(tenant=tenant, output=output)},
            headers={"Authorization": f"Bearer {author_key}"},
            timeout=60,
        )
        assert response.status_code == 200, response.text
        result: dict[str, Any] = response.json()["result"]
        return result

    assert evaluate("acme", canary)["status"] == "pass"
    globex = evaluate("globex", "globex's own")
    assert globex["status"] == "pass" and canary not in str(globex)
