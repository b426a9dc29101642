"""A judge model's `apiKeyEnv` never names one of the console's own settings.

Its value is sent to the model's URL as a Bearer token: `DJANGO_SECRET_KEY` or
`DATABASE_URL` there would hand the console's secrets to whoever serves that URL. The API,
the page, the admin and the CI command's judge models refuse them on the field; a call
made with such a registration anyway (a row stored before) sends nothing.
"""

from __future__ import annotations

import time
from typing import Any

import httpx
import pytest
from django.contrib.auth.models import User

from guardrails.engine.judge import InvalidJudgeModel, JudgeModel, build_prompt, call_judge, judge_models_of_export
from guardrails.models import JudgeModelRegistration
from kindgi_console.env import DECLARATION
from tests.conftest import signed_in
from tests.fakeproviders import FakeProvider
from tests.traces.test_judge_pages import URL, form_data, registration

CONSOLE_SETTINGS = ["DJANGO_SECRET_KEY", "DATABASE_URL", "CELERY_BROKER_URL", "EMAIL_HOST_PASSWORD", "KINDGI_API_KEY"]


@pytest.mark.parametrize("name", [*CONSOLE_SETTINGS, "SECRET_KEY", "KINDGI_ANYTHING_NEW"])
def test_the_api_refuses_a_console_setting_as_the_key_variable(api: Any, root: User, name: str) -> None:
    response = api(root).post("/api/v1/judge-models", data=registration("leaky", apiKeyEnv=name), format="json")
    assert response.status_code == 400, response.content
    errors = response.json()["errors"]
    assert [error["path"] for error in errors] == ["/apiKeyEnv"]
    assert name in errors[0]["message"] and "console's own settings" in errors[0]["message"]
    assert not JudgeModelRegistration.objects.exists()


def test_every_declared_setting_is_refused_and_a_providers_key_is_taken(api: Any, root: User) -> None:
    from traces.judge.registry import validate_registration

    for variable in DECLARATION.variables:
        issues = validate_registration(registration("leaky", apiKeyEnv=variable.name))
        assert [issue.path for issue in issues] == ["/apiKeyEnv"], variable.name
    for name in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "ACME_JUDGE_KEY"):
        response = api(root).post(
            "/api/v1/judge-models", data=registration(name.lower(), apiKeyEnv=name), format="json"
        )
        assert response.status_code == 201, response.content


def test_the_page_and_the_admin_refuse_it_on_the_field(root: User) -> None:
    client = signed_in(root)
    page = client.post(URL, form_data(api_key_env="DJANGO_SECRET_KEY"))
    assert page.status_code == 400
    assert "console's own settings" in page.context["form"].errors["api_key_env"][0]
    admin = client.post(
        "/admin/guardrails/judgemodelregistration/add/",
        {
            "model_id": "leaky",
            "provider": "openai",
            "model": "m",
            "base_url": "http://127.0.0.1:9/v1",
            "api_key_env": "DATABASE_URL",
            "input_usd_per_mtok": "0.4",
            "output_usd_per_mtok": "1.6",
            "capabilities": '["json"]',
            "thinking": "null",
            "sampling": "on",
            "enabled": "on",
        },
    )
    assert admin.status_code == 200
    assert "/apiKeyEnv" in admin.context["adminform"].form.errors["api_key_env"][0]
    assert not JudgeModelRegistration.objects.exists()


def test_the_ci_commands_judge_models_refuse_it_with_its_pointer(fake_provider: FakeProvider) -> None:
    with pytest.raises(InvalidJudgeModel) as raised:
        judge_models_of_export([fake_provider.registration("leaky", apiKeyEnv="DJANGO_SECRET_KEY")])
    assert [issue.path for issue in raised.value.issues] == ["/0/apiKeyEnv"]


def test_a_call_with_a_console_setting_as_its_key_sends_nothing(fake_provider: FakeProvider, monkeypatch: Any) -> None:
    monkeypatch.setenv("DJANGO_SECRET_KEY", "the-consoles-own-secret")
    model = JudgeModel.from_dict(fake_provider.registration("stored-before", apiKeyEnv="DJANGO_SECRET_KEY"))
    prompt = build_prompt("Never promise a refund.", "pass-fail", {"output": "No refunds, sorry."})
    with httpx.Client() as http:
        result = call_judge(model, prompt, http=http, deadline=time.monotonic() + 5)
    assert result.outcome is None and result.error is not None
    assert "DJANGO_SECRET_KEY" in result.error and "the-consoles-own-secret" not in result.error
    assert fake_provider.requests == []
