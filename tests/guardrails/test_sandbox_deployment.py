"""The deployment's sandbox and packs, built from settings."""

from __future__ import annotations

import io
import sys
import uuid

import pytest
from django.core.management import call_command

from guardrails import deployment
from guardrails.engine import deployment as recipe
from guardrails.engine.packs import PackError
from guardrails.engine.registration import define_guardrail
from tests.conftest import make_guardrail


@pytest.fixture(autouse=True)
def fresh_deployment():
    deployment._loaded.cache_clear()
    yield
    deployment._loaded.cache_clear()


def test_packs_named_in_settings_are_loaded_with_their_warnings(settings):
    settings.KINDGI_CHECK_PACKS = ["tests.packs.greetings", "tests.packs.shadows_builtin"]
    assert deployment.check_registry().get("says-word").pack == "tests.packs.greetings"
    [warning] = deployment.pack_warnings()
    assert "replaces check 'must-cite' of pack 'tests.packs.shadows_builtin'" in warning.message


def test_an_invalid_pack_stops_start_up(settings):
    settings.KINDGI_CHECK_PACKS = ["tests.packs.bad_schema"]
    with pytest.raises(PackError, match="broken-schema"):
        deployment.check_registry()


@pytest.mark.django_db
def test_a_check_is_given_only_what_the_operator_lists_and_never_the_consoles_own(settings, monkeypatch):
    for name, value in {
        "DJANGO_SECRET_KEY": "console-only",
        "OPENAI_API_KEY": "sk-judge",
        "DATABASE_URL": "pg://secret",
        "ACME_TOKEN": "for-checks",
        "REGION": "eu",
        "UNLISTED": "x",
    }.items():
        monkeypatch.setenv(name, value)
    settings.KINDGI_SECRETS = ["ACME_TOKEN", "OPENAI_API_KEY"]
    settings.KINDGI_PACK_ENV = ["REGION", "DATABASE_URL", "DJANGO_SECRET_KEY"]
    settings.KINDGI_CAPABILITIES = ["http"]
    assert deployment.handler_environ() == {"ACME_TOKEN": "for-checks", "REGION": "eu"}
    policy = deployment.registration_policy()
    assert policy.available_secrets == frozenset({"ACME_TOKEN"})
    assert policy.available_env == frozenset({"REGION"})
    assert policy.capabilities == frozenset({"http"})


@pytest.mark.django_db
def test_a_registered_judge_models_key_is_never_handed_to_a_check(settings, monkeypatch):
    from guardrails.models import JudgeModelRegistration
    from guardrails.redaction import forget_key_names

    JudgeModelRegistration.objects.create(
        model_id="local",
        provider="openai",
        model="m",
        base_url="http://127.0.0.1:1",
        api_key_env="ACME_JUDGE_KEY",
        input_usd_per_mtok=1,
        output_usd_per_mtok=1,
    )
    forget_key_names()
    monkeypatch.setenv("ACME_JUDGE_KEY", "sk-judge")
    settings.KINDGI_SECRETS = ["ACME_JUDGE_KEY"]
    settings.KINDGI_PACK_ENV = ["ACME_JUDGE_KEY"]
    assert "ACME_JUDGE_KEY" not in deployment.handler_environ()
    forget_key_names()


@pytest.mark.django_db
def test_a_guardrail_asking_for_a_judge_key_is_refused_at_registration(settings, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-judge")
    settings.KINDGI_PACK_ENV = ["OPENAI_API_KEY"]
    document = make_guardrail(
        "wants-key",
        check="required-substring",
        config={"values": ["x"]},
        sandbox="strict",
        needsSpec={"env": {"OPENAI_API_KEY": {}}},
    )
    registration = define_guardrail(
        document, registry=deployment.check_registry(), policy=deployment.registration_policy()
    )
    assert [error.path for error in registration.errors] == ["/needsSpec/env/OPENAI_API_KEY"]


def test_the_pool_takes_its_limits_from_settings(settings):
    settings.KINDGI_SANDBOX_MEM_MB = 96
    settings.KINDGI_SANDBOX_CPU_MS = 300
    defaults = deployment.sandbox_defaults()
    assert (defaults.mem_mb, defaults.cpu_ms) == (96, 300)


@pytest.fixture
def host_without_bubblewrap(monkeypatch):
    from guardrails.engine.sandbox import boundary

    monkeypatch.setattr(boundary, "host_boundary", lambda: boundary.Boundary("/nonexistent/bwrap"))


def test_check_deploy_says_which_postures_this_host_enforces(monkeypatch):
    # The browser tests' DJANGO_ALLOW_ASYNC_UNSAFE (set when they are collected) is an error
    # for `check --deploy`; it is theirs only, never a deployment's.
    monkeypatch.delenv("DJANGO_ALLOW_ASYNC_UNSAFE", raising=False)
    out = io.StringIO()
    call_command("check", "--deploy", stdout=out, stderr=out)
    assert "(guardrails.I002) sandbox posture strict: bubblewrap" in out.getvalue()


def test_check_deploy_warns_where_the_sandbox_cannot_be_built(host_without_bubblewrap):
    messages = deployment.sandbox_system_checks()
    assert [m.id for m in messages] == ["guardrails.W002", "guardrails.W002"]
    assert "strict: not enforced, such checks answer error: bubblewrap cannot be started" in (messages[1].msg)


@pytest.mark.django_db
def test_the_guardrails_page_lists_the_postures_this_host_enforces(client, alice, host_without_bubblewrap):
    client.force_login(alice)
    page = client.get("/guardrails/")
    assert page.status_code == 200
    rows = {row["posture"]: row["enforced"] for row in page.context["sandbox_postures"]}
    assert rows == {"none": True, "context-isolated": False, "strict": False}
    assert b"Sandbox postures on this host" in page.content


WHERE_AM_I = """
import os
from guardrails.engine.registry import define_check
from guardrails.engine.types import PASSED

def says_where(config, trace):
    return PASSED

_WHERE = "sandbox" if os.getuid() == 65534 else "console"
CHECKS = [define_check(f"imported-in-{_WHERE}", "zero-llm", says_where,
                       config_schema={"type": "object"})]
"""

VALIDATES_IN_CODE = """
from guardrails.engine.registry import define_check
from guardrails.engine.types import PASSED

def passes(config, trace):
    return PASSED

CHECKS = [define_check("validated-in-code", "zero-llm", passes, validate_config=lambda c: [])]
"""


def a_pack(tmp_path, monkeypatch, source):
    name = f"kindgi_pack_{uuid.uuid4().hex}"
    (tmp_path / f"{name}.py").write_text(source)
    monkeypatch.syspath_prepend(str(tmp_path))
    return name


def test_a_pack_is_imported_only_inside_a_sandbox(tmp_path, monkeypatch):
    name = a_pack(tmp_path, monkeypatch, WHERE_AM_I)
    engine, _ = recipe.load_engine([name])
    check = engine.registry.get("imported-in-sandbox")
    assert check is not None and check.pack == name
    assert name not in sys.modules
    assert engine.registry.get("imported-in-console") is None


def test_a_pack_that_hoards_memory_at_import_stops_start_up_not_the_console():
    with pytest.raises(PackError, match="cannot be imported: memory limit exceeded"):
        recipe.load_engine(["tests.packs.hostile_import"])


def test_a_pack_check_validating_its_config_in_code_is_refused(tmp_path, monkeypatch):
    name = a_pack(tmp_path, monkeypatch, VALIDATES_IN_CODE)
    with pytest.raises(PackError, match="validates its config with Python code"):
        recipe.load_engine([name])
