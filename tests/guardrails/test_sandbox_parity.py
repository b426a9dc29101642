"""The CI command and the server give the same result for the same sandboxed guardrail.

`manage.py guardrail_ci` runs in its own process without Django, reading the console's
export and the packs of KINDGI_CHECK_PACKS; POST evaluate runs in the console. Both build
their engine and sandbox from guardrails.engine.deployment.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from django.test import override_settings

from guardrails.engine.sandbox import SandboxPool
from tests.conftest import make_guardrail, make_trace
from tests.guardrails.conftest import manage_guardrail_ci

PACK = "tests.packs.generated"


def strict(guardrail_id: str, check: str, config: dict[str, Any], cpu_ms: int) -> dict[str, Any]:
    return make_guardrail(
        guardrail_id,
        check=check,
        config=config,
        sandbox="strict",
        limits={"memMB": 64, "cpuMs": cpu_ms},
        network={"kind": "none"},
        action={"on-violation": "log-only"},
    )


GUARDRAILS = [
    strict("says-refunded", "sandboxed-says-hello", {"word": "refunded"}, 1000),
    strict("greedy", "sandboxed-allocates", {"mb": 512}, 2000),
    strict("spins", "sandboxed-loops-forever", {}, 200),
]
EXPECTED = {
    "says-refunded": ("pass", None),
    "greedy": ("error", "memory limit 64 MB exceeded"),
    "spins": ("error", "CPU limit 200 ms exceeded"),
}


def ci_results(tmp_path: Path, export: list[dict[str, Any]], trace: dict[str, Any]) -> dict[str, Any]:
    run = manage_guardrail_ci(tmp_path, export, [trace], PACK, timeout=120)
    assert run.returncode == 1, run.stderr  # the errors block the build
    return {r["guardrail"]: (r["status"], r["reason"]) for r in json.loads(run.stdout)["results"]}


@pytest.mark.django_db
def test_ci_and_post_evaluate_agree_on_a_strict_pack_guardrail(
    api: Any, alice: Any, acme_key: str, author_key: str, deployment_pool: SandboxPool, tmp_path: Path
) -> None:
    trace = make_trace(tenant="acme")
    with override_settings(KINDGI_CHECK_PACKS=[PACK]):
        for document in GUARDRAILS:
            created = api(alice).post("/api/v1/guardrails", data=document, format="json")
            assert created.status_code == 201, created.json()
        body = api(acme_key).post("/api/v1/evaluate?store=false", data=trace, format="json").json()
    export = api(author_key).get("/api/v1/guardrails/export").json()
    server = {r["guardrail"]: (r["status"], r["reason"]) for r in body["results"]}
    assert server == EXPECTED
    assert ci_results(tmp_path, export, trace) == server
