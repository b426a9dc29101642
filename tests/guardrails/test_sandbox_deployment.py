"""The deployment's sandbox and packs, built from settings."""

from __future__ import annotations

import pytest

from guardrails import deployment
from guardrails.engine.packs import PackError


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


def test_the_console_configuration_never_reaches_a_check(settings, monkeypatch):
    monkeypatch.setenv("DJANGO_SECRET_KEY", "console-only")
    monkeypatch.setenv("KINDGI_TEST_API_TOKEN", "for-checks")
    monkeypatch.setenv("REGION", "eu")
    settings.KINDGI_SECRETS = ["KINDGI_TEST_API_TOKEN"]
    settings.KINDGI_CAPABILITIES = ["http"]
    environ = deployment.handler_environ()
    assert "DJANGO_SECRET_KEY" not in environ
    assert environ["KINDGI_TEST_API_TOKEN"] == "for-checks"
    policy = deployment.registration_policy()
    assert "KINDGI_TEST_API_TOKEN" in policy.available_secrets
    assert "REGION" in policy.available_env
    assert "DJANGO_SECRET_KEY" not in policy.available_env
    assert policy.capabilities == frozenset({"http"})


def test_the_pool_takes_its_limits_from_settings(settings):
    settings.KINDGI_SANDBOX_MEM_MB = 96
    settings.KINDGI_SANDBOX_CPU_MS = 300
    defaults = deployment.sandbox_defaults()
    assert (defaults.mem_mb, defaults.cpu_ms) == (96, 300)
