"""The judge models page: the registry, its editing by superusers, a tenant's policy by its
admins, no key ever on the page, and the estimate partial."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import User
from django.template.loader import render_to_string
from django.test import Client

from guardrails.models import JudgeModelRegistration, TenantJudgePolicy
from kindgi_console.tenancy.models import Tenant
from tests.conftest import signed_in
from traces.judge.registry import registration_doc, save_policy, save_registration

URL = "/judge-models/"


def registration(model_id: str, **fields: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "id": model_id,
        "provider": "openai",
        "model": f"{model_id}-model",
        "baseUrl": "http://127.0.0.1:9/v1",
        "apiKeyEnv": None,
        "pricing": {"inputUsdPerMTok": "0.40", "outputUsdPerMTok": "1.60"},
        "capabilities": ["json"],
        "sampling": True,
    }
    doc.update(fields)
    return doc


def form_data(**fields: Any) -> dict[str, Any]:
    data = {
        "id": "local",
        "provider": "openai",
        "model": "gpt-local",
        "base_url": "http://127.0.0.1:9/v1",
        "api_key_env": "",
        "input_price": "0.40",
        "output_price": "1.60",
        "capabilities": "json, reasoning",
        "thinking": "",
        "thinking_value": "",
        "sampling": "on",
        "enabled": "on",
    }
    data.update(fields)
    return data


def test_bob_reads_the_registry_without_forms_and_never_a_key(
    bob: User, monkeypatch: Any, django_assert_max_num_queries: Any
) -> None:
    monkeypatch.setenv("JUDGE_KEY", "sk-never-shown")
    save_registration(registration("keyed", apiKeyEnv="JUDGE_KEY", thinking={"effort": "minimal"}))
    save_registration(registration("unset", apiKeyEnv="NOT_SET_ANYWHERE", sampling=False))
    page = signed_in(bob).get(URL)
    html = page.content.decode()
    assert page.status_code == 200
    assert "sk-never-shown" not in html
    assert "JUDGE_KEY" in html and ">set<" in html and "not set" in html
    assert "effort minimal" in html and "no temperature sent" in html
    assert "Register a judge model" not in html and "Save policy" not in html


def test_the_page_costs_the_same_queries_for_two_or_twenty_models(bob: User) -> None:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    counts = []
    for total in (2, 20):
        for n in range(total):
            save_registration(registration(f"m{total}-{n}"))
        with CaptureQueriesContext(connection) as queries:
            assert signed_in(bob).get(URL).status_code == 200
        counts.append(len(queries))
    assert counts[0] == counts[1]


def test_a_superuser_registers_edits_and_deletes_a_model(root: User) -> None:
    client = signed_in(root)
    assert "Register a judge model" in client.get(URL).content.decode()
    response = client.post(URL, form_data())
    assert response.status_code == 302
    doc = registration_doc(JudgeModelRegistration.objects.get(model_id="local"))
    assert doc["capabilities"] == ["json", "reasoning"] and doc["pricing"]["inputUsdPerMTok"] == "0.4"
    edit = client.get("/judge-models/local/edit/")
    assert edit.status_code == 200 and 'value="gpt-local"' in edit.content.decode()
    saved = client.post(
        "/judge-models/local/edit/", form_data(id="renamed", output_price="2", thinking="effort", thinking_value="low")
    )
    assert saved.status_code == 302
    row = JudgeModelRegistration.objects.get()
    assert row.model_id == "local" and registration_doc(row)["thinking"] == {"effort": "low"}
    assert client.post("/judge-models/local/delete/").status_code == 302
    assert not JudgeModelRegistration.objects.exists()
    assert client.post("/judge-models/local/delete/").status_code == 404


def test_bad_registrations_are_shown_on_their_fields(root: User) -> None:
    client = signed_in(root)
    response = client.post(URL, form_data(base_url="ftp://x", thinking="budgetTokens", thinking_value="lots"))
    html = response.content.decode()
    assert response.status_code == 400
    assert html.count('class="field__error"') >= 2
    precise = client.post(URL, form_data(input_price="0.0000001"))
    assert precise.status_code == 400
    assert "a price has at most six decimal places" in precise.content.decode()
    assert not JudgeModelRegistration.objects.exists()
    client.post(URL, form_data())
    again = client.post(URL, form_data())
    assert again.status_code == 400 and "already registered" in again.content.decode()


def test_only_a_superuser_changes_the_registry(alice: User, dana: User) -> None:
    save_registration(registration("local"))
    for person in (alice, dana):
        client = signed_in(person)
        assert client.post(URL, form_data(id="mine")).status_code == 403
        assert client.get("/judge-models/local/edit/").status_code == 403
        assert client.post("/judge-models/local/delete/").status_code == 403
    assert JudgeModelRegistration.objects.count() == 1


def test_a_tenant_admin_sets_the_policy_and_others_may_not(
    acme: Tenant, dana: User, alice: User, charlie: User, globex: Tenant
) -> None:
    save_registration(registration("a"))
    save_registration(registration("b"))
    admin = signed_in(dana)
    assert "Save policy" in admin.get(URL).content.decode()
    assert admin.post("/judge-models/policy/", {"allowed": ["b"]}).status_code == 302
    assert TenantJudgePolicy.objects.get(tenant=acme).allowed_models == ["b"]
    assert 'pill--plain">not allowed' in admin.get(URL).content.decode()
    admin.post("/judge-models/policy/", {"all": "1"})
    assert TenantJudgePolicy.objects.get(tenant=acme).allowed_models is None
    assert signed_in(alice).post("/judge-models/policy/", {"allowed": []}).status_code == 403
    # charlie is no admin of globex either; acme's policy is not his to see.
    save_policy(acme, {"allowedModels": ["a"]})
    outsider = signed_in(charlie)
    html = outsider.get(URL).content.decode()
    assert "Judge policy of Globex" in html and 'pill--plain">not allowed' not in html
    assert outsider.post("/judge-models/policy/", {"allowed": []}).status_code == 403
    assert TenantJudgePolicy.objects.get(tenant=acme).allowed_models == ["a"]


def test_a_visitor_is_sent_to_sign_in(db: Any) -> None:
    response = Client().get(URL)
    assert response.status_code == 302 and "/login/" in response["Location"]


def test_the_estimate_partial_shows_calls_cost_and_reasons() -> None:
    estimate = {
        "calls": 12,
        "cached": 3,
        "costUsd": "0.0123",
        "traces": 900,
        "sampled": 500,
        "extrapolated": True,
        "models": {"grounded": "local"},
        "errors": {"pinned": "judge model 'x' is not registered <b>"},
    }
    html = render_to_string("partials/judge_estimate.html", {"estimate": estimate})
    assert "12" in html and "0.0123" in html and "newest 500 of 900" in html
    assert "grounded → local" in html and "&lt;b&gt;" in html
    assert render_to_string("partials/judge_estimate.html", {"estimate": None}).strip() == ""


def test_the_admin_lists_and_checks_registrations_and_policies(root: User, acme: Tenant) -> None:
    save_registration(registration("local"))
    client = signed_in(root)
    for url in (
        "/admin/guardrails/judgemodelregistration/",
        "/admin/guardrails/judgemodelregistration/add/",
        "/admin/guardrails/tenantjudgepolicy/add/",
        "/admin/guardrails/judgecacheentry/",
    ):
        assert client.get(url).status_code == 200, url
    bad = client.post("/admin/guardrails/tenantjudgepolicy/add/", {"tenant": acme.pk, "allowed_models": '["ghost"]'})
    assert bad.status_code == 200 and "no judge model" in bad.content.decode()
    assert not TenantJudgePolicy.objects.exists()
    ok = client.post("/admin/guardrails/tenantjudgepolicy/add/", {"tenant": acme.pk, "allowed_models": '["local"]'})
    assert ok.status_code == 302
    assert TenantJudgePolicy.objects.get().allowed_models == ["local"]
