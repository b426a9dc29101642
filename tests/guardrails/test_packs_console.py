"""The console's packs: start-up, `manage.py check`, GET checks, the production rule over
REST, and the sandbox on every server evaluation path."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.test import override_settings

from guardrails import deployment
from guardrails.engine.sandbox import SandboxPool
from tests.conftest import make_guardrail, make_trace
from traces.judge.services import evaluation_services
from traces.models import EvaluationResult

ROOT = Path(__file__).resolve().parents[2]
GENERATED = override_settings(KINDGI_CHECK_PACKS=["tests.packs.generated", "tests.packs.greetings"])


def manage(*argv: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "manage.py", *argv],
        cwd=ROOT,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=60,
    )


# --- start-up ------------------------------------------------------------------------------


def test_an_invalid_pack_stops_start_up_naming_the_pack_and_the_check() -> None:
    with (
        override_settings(KINDGI_CHECK_PACKS=["tests.packs.bad_schema"]),
        pytest.raises(ImproperlyConfigured, match=r"pack 'tests\.packs\.bad_schema'.*'broken-schema'"),
    ):
        deployment.load_at_start_up()


def test_the_console_does_not_start_with_an_invalid_pack() -> None:
    result = manage("check", KINDGI_CHECK_PACKS="tests.packs.unknown_kind")
    assert result.returncode != 0
    assert "ImproperlyConfigured" in result.stderr
    assert "pack 'tests.packs.unknown_kind': check 'entangled' is of kind 'quantum'" in result.stderr


def test_manage_py_check_shows_a_builtin_replacing_a_pack_check() -> None:
    result = manage("check", KINDGI_CHECK_PACKS="tests.packs.shadows_builtin")
    assert result.returncode == 0, result.stderr
    assert "guardrails.W001" in result.stderr + result.stdout
    assert (
        "the built-in check 'must-cite' replaces check 'must-cite' of pack "
        "'tests.packs.shadows_builtin'" in result.stderr + result.stdout
    )


def test_loading_a_pack_that_loses_a_check_to_a_builtin_logs_a_warning(caplog) -> None:
    with override_settings(KINDGI_CHECK_PACKS=["tests.packs.shadows_builtin"]):
        deployment.load_at_start_up()
        [message] = deployment.pack_system_checks()
    assert message.id == "guardrails.W001"
    assert "'must-cite' of pack 'tests.packs.shadows_builtin'" in caplog.text


# --- GET checks ----------------------------------------------------------------------------


def test_get_checks_lists_each_check_with_its_pack_kind_and_schema(api: Any, bob: Any) -> None:
    with GENERATED:
        checks = {check["id"]: check for check in api(bob).get("/api/v1/checks").json()}
    assert checks["says-word"] == {
        "id": "says-word",
        "kind": "zero-llm",
        "description": "The output contains a word.",
        "configSchema": {
            "type": "object",
            "properties": {"word": {"type": "string", "minLength": 1}},
            "required": ["word"],
            "additionalProperties": False,
        },
        "builtin": False,
        "pack": "tests.packs.greetings",
        "packVersion": "1.2.0",
        "stages": ["output"],
    }
    assert checks["sandboxed-allocates"]["pack"] == "tests.packs.generated"
    assert checks["must-cite"]["builtin"] is True
    assert checks["must-cite"]["pack"] is None


# --- the production rule over REST ---------------------------------------------------------


def filesystem_guardrail(**fields: Any) -> dict[str, Any]:
    fields.setdefault("codeArtifactRef", {"kind": "filesystem", "modulePath": "/home/dev/checks/words.py"})
    return make_guardrail("local-check", check="says-word", config={"word": "refunded"}, **fields)


REFUSED = {
    "path": "/codeArtifactRef/kind",
    "message": "a filesystem code artifact is refused in production: package the check as a "
    "pack (KINDGI_CHECK_PACKS) and reference it with an oci artifact",
}


@pytest.mark.parametrize("method", ["create", "validate", "update"])
def test_production_refuses_a_filesystem_artifact_over_rest(api: Any, alice: Any, method: str) -> None:
    client = api(alice)
    with GENERATED, override_settings(KINDGI_PRODUCTION=True):
        if method == "create":
            response = client.post("/api/v1/guardrails", data=filesystem_guardrail(), format="json")
            assert response.status_code == 400
            errors = response.json()["errors"]
        elif method == "validate":
            body = client.post("/api/v1/guardrails/validate", data=filesystem_guardrail(), format="json").json()
            assert body["valid"] is False
            errors = body["errors"]
        else:
            created = client.post("/api/v1/guardrails", data=make_guardrail("local-check"), format="json")
            assert created.status_code == 201
            response = client.put("/api/v1/guardrails/local-check", data=filesystem_guardrail(), format="json")
            assert response.status_code == 400
            errors = response.json()["errors"]
    assert REFUSED in errors


def test_production_accepts_the_packaged_check_with_an_oci_artifact(api: Any, alice: Any) -> None:
    oci = {
        "kind": "oci",
        "imageRef": "registry.example/greetings",
        "modulePath": "tests.packs.greetings",
        "artifactVersion": "1.2.0",
    }
    with GENERATED, override_settings(KINDGI_PRODUCTION=True):
        response = api(alice).post("/api/v1/guardrails", format="json", data=filesystem_guardrail(codeArtifactRef=oci))
    assert response.status_code == 201, response.json()


# --- every evaluation path gets the sandbox ------------------------------------------------


@pytest.mark.django_db
def test_evaluation_services_hand_out_the_deployment_pool(deployment_pool: SandboxPool) -> None:
    with evaluation_services("acme") as services:
        assert services.sandbox is deployment_pool
    with evaluation_services(None) as services:
        assert services.sandbox is deployment_pool


def greedy(mb: int) -> dict[str, Any]:
    return make_guardrail(
        "greedy",
        check="sandboxed-allocates",
        config={"mb": mb},
        sandbox="strict",
        limits={"memMB": 64, "cpuMs": 2000},
        action={"on-violation": "log-only"},
    )


def test_ingestion_evaluates_sandboxed_guardrails_in_the_pool(
    api: Any, alice: Any, acme_key: str, deployment_pool: SandboxPool, django_capture_on_commit_callbacks: Any
) -> None:
    with GENERATED:
        assert api(alice).post("/api/v1/guardrails", data=greedy(512), format="json").status_code == 201
        with django_capture_on_commit_callbacks(execute=True):
            response = api(acme_key).post("/api/v1/traces", data=make_trace(), format="json")
    assert response.status_code in (200, 201, 202), response.json()
    result = EvaluationResult.objects.get()
    assert (result.mode, result.status, result.reason) == ("runtime", "error", "memory limit 64 MB exceeded")
    assert deployment_pool.started == 1


def test_post_evaluate_runs_sandboxed_guardrails_in_the_pool(
    api: Any, alice: Any, acme_key: str, deployment_pool: SandboxPool
) -> None:
    with GENERATED:
        api(alice).post("/api/v1/guardrails", data=greedy(8), format="json")
        body = api(acme_key).post("/api/v1/evaluate", data=make_trace(), format="json").json()
    assert [(r["guardrail"], r["status"]) for r in body["results"]] == [("greedy", "pass")]
    assert deployment_pool.started == 1
