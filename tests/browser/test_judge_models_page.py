"""The judge models page in a real browser: a superuser registers a model, an admin sets
the tenant's policy."""

import pytest
from django.contrib.auth.models import User

from guardrails.models import JudgeModelRegistration, TenantJudgePolicy
from kindgi_console.tenancy.models import Membership, Tenant
from tests.browser.conftest import screenshot
from traces.judge.registry import save_registration


@pytest.mark.django_db(transaction=True)
def test_a_superuser_registers_a_judge_model_and_an_admin_narrows_the_policy(page, sign_in, monkeypatch):
    monkeypatch.setenv("DEMO_JUDGE_KEY", "sk-demo-secret")
    acme = Tenant.objects.create(slug="acme", name="Acme")
    root = User.objects.create_superuser("root", password="pw-root-123")
    Membership.objects.create(user=root, tenant=acme, role="admin")
    save_registration(
        {
            "id": "claude-judge",
            "provider": "anthropic",
            "model": "claude-haiku",
            "baseUrl": "https://api.anthropic.com",
            "apiKeyEnv": "MISSING_ANTHROPIC_KEY",
            "pricing": {"inputUsdPerMTok": "0.80", "outputUsdPerMTok": "4"},
            "capabilities": ["json", "long-context", "reasoning"],
            "thinking": {"budgetTokens": 1024},
            "sampling": False,
        }
    )
    sign_in("root", "pw-root-123")
    page.goto("/judge-models/")
    page.locator("#id_id").fill("local-judge")
    page.locator("#id_model").fill("gpt-4.1-mini")
    page.locator("#id_base_url").fill("http://127.0.0.1:8089/v1")
    page.locator("#id_api_key_env").fill("DEMO_JUDGE_KEY")
    page.locator("#id_input_price").fill("0.40")
    page.locator("#id_output_price").fill("1.60")
    page.locator("#id_capabilities").fill("json")
    page.get_by_role("button", name="Register").click()
    page.wait_for_url("**/judge-models/")
    assert JudgeModelRegistration.objects.filter(model_id="local-judge").exists()
    assert "sk-demo-secret" not in page.content()
    page.get_by_label("Every registered model, including those registered later").uncheck()
    page.locator('input[name="allowed"][value="local-judge"]').check()
    page.get_by_role("button", name="Save policy").click()
    page.wait_for_url("**/judge-models/")
    assert TenantJudgePolicy.objects.get(tenant=acme).allowed_models == ["local-judge"]
    screenshot(page, "judge-models")
    assert page.script_errors == []
