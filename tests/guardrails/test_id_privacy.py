"""Guardrail ids are one namespace for the console, and no tenant learns of another's from it.

charlie (globex) choosing an id that an acme guardrail holds is refused with the words used
for an id that a deleted console-wide guardrail holds: they name no owner and do not say
that a guardrail exists. Nor does any page hand him acme's guardrail under its id.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from guardrails.models import Guardrail
from guardrails.services import Author, delete_guardrail, save_guardrail
from kindgi_console.tenancy.models import Tenant
from tests.conftest import make_guardrail, signed_in

URL = "/api/v1/guardrails"
FIXTURE = Author(user=None, label="fixture")
#: Words that would tell charlie that someone holds the id, or who.
TELLING = ("taken", "exist", "another tenant", "another guardrail", "acme", "owner", "deleted", "held by")


@pytest.fixture
def held(acme: Tenant, globex: Tenant) -> None:
    """acme's live and deleted guardrails, and a deleted console-wide one."""
    save_guardrail(make_guardrail("acme-live", name="Acme's secret rule"), FIXTURE, owner=acme)
    delete_guardrail(save_guardrail(make_guardrail("acme-gone"), FIXTURE, owner=acme))
    delete_guardrail(save_guardrail(make_guardrail("console-gone"), FIXTURE))


def refusal(body: dict[str, Any], guardrail_id: str) -> str:
    (error,) = body["errors"]
    assert error["path"] == "/id"
    return str(error["message"]).replace(repr(guardrail_id), "<id>")


def test_an_id_held_by_another_tenant_is_refused_as_any_unavailable_id_is(api: Any, held: None, charlie: Any) -> None:
    client = api(charlie)
    answers = {}
    for guardrail_id in ("acme-live", "acme-gone", "console-gone"):
        response = client.post(URL, data=make_guardrail(guardrail_id), format="json")
        assert response.status_code == 409, (guardrail_id, response.content)
        answers[guardrail_id] = refusal(response.json(), guardrail_id)
    assert len(set(answers.values())) == 1, answers
    message = answers["acme-live"].lower()
    assert not [word for word in TELLING if word in message], message
    assert Guardrail.objects.filter(tenant__slug="globex").count() == 0


def test_the_import_page_refuses_it_in_the_same_words(held: None, charlie: Any, api: Any) -> None:
    api_answer = refusal(
        api(charlie).post(URL, data=make_guardrail("console-gone"), format="json").json(), "console-gone"
    )
    client = signed_in(charlie)
    for guardrail_id in ("acme-live", "acme-gone"):
        upload = SimpleUploadedFile("g.json", json.dumps(make_guardrail(guardrail_id)).encode(), "application/json")
        response = client.post("/guardrails/import/", {"files": [upload]})
        assert response.status_code == 400
        (error,) = response.context["reports"][0].guardrails[0].errors
        assert error.path == "/id"
        assert error.message.replace(repr(guardrail_id), "<id>") == api_answer
    assert Guardrail.objects.get(guardrail_id="acme-live").revision == 1


def test_the_preview_form_never_fills_in_another_tenants_guardrail(held: None, charlie: Any) -> None:
    page = signed_in(charlie).get("/guardrails/previews/new/?guardrail=acme-live")
    assert page.status_code == 200
    assert "Acme&#x27;s secret rule" not in page.content.decode()
    assert "Acme's secret rule" not in page.content.decode()
