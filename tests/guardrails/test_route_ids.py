"""A guardrail id that is the name of another route under guardrails/ (`validate`, `export`,
`try`, `preview`, `new`, `import`) could be saved but not read at its URL: the console
refuses it at /id wherever it registers a guardrail (the API, the editor, which saves and
validates through the API, the import page), and the engine's commands, which follow the
wire contract, accept it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import URLPattern, URLResolver, get_resolver, resolve
from django.urls.exceptions import Resolver404

from guardrails.api.guardrails import GuardrailDetailView
from guardrails.engine.cli import run_validate_guardrail
from guardrails.models import Guardrail
from guardrails.services import ROUTE_IDS
from tests.conftest import make_guardrail, signed_in
from tests.guardrails.test_engine_cli import run, write
from traces.review.guardrail_views import GuardrailDetailView as GuardrailPage

URL = "/api/v1/guardrails"


def _routes(patterns: list[Any], prefix: str = "") -> list[str]:
    found = []
    for pattern in patterns:
        if isinstance(pattern, URLResolver):
            found += _routes(pattern.url_patterns, prefix + str(pattern.pattern))
        elif isinstance(pattern, URLPattern):
            found.append(prefix + str(pattern.pattern))
    return found


def _addressable(guardrail_id: str) -> bool:
    """Whether the guardrail's API URL and page URL reach the guardrail's own views."""
    try:
        api, page = resolve(f"{URL}/{guardrail_id}"), resolve(f"/guardrails/{guardrail_id}/")
    except Resolver404:
        return False
    return getattr(api.func, "view_class", None) is GuardrailDetailView and (
        getattr(page.func, "view_class", None) is GuardrailPage
    )


def test_the_refused_ids_are_exactly_the_route_names_that_hide_a_guardrail() -> None:
    names = set()
    for route in _routes(get_resolver().url_patterns):
        _, under, rest = route.partition("guardrails/")
        segment = rest.split("/")[0]
        if under and segment and not segment.startswith("<"):
            names.add(segment)
    assert {"validate", "export", "try", "preview", "new", "import", "previews", "export.json"} <= names
    assert {name for name in names if not _addressable(name)} == ROUTE_IDS
    assert _addressable("no-refunds") and _addressable("previews")


@pytest.mark.parametrize("guardrail_id", sorted(ROUTE_IDS))
def test_the_api_refuses_them_at_id(api: Any, alice: Any, guardrail_id: str) -> None:
    client = api(alice)
    document = make_guardrail(guardrail_id)
    response = client.post(f"{URL}?tenant=acme", document, format="json")
    assert response.status_code == 400
    (error,) = response.json()["errors"]
    assert error["path"] == "/id"
    assert f"{guardrail_id!r} is the name of another route under guardrails/" in error["message"]
    assert not Guardrail.objects.exists()
    checked = client.post(f"{URL}/validate", document, format="json").json()  # the editor's live check
    assert checked["valid"] is False and [e["path"] for e in checked["errors"]] == ["/id"]


def test_the_import_page_refuses_them_at_id(client: Any, alice: Any) -> None:
    file = SimpleUploadedFile("g.json", json.dumps(make_guardrail("export")).encode(), "application/json")
    response = signed_in(alice).post("/guardrails/import/", {"files": [file]})
    assert response.status_code == 400
    (report,) = response.context["reports"][0].guardrails
    assert [issue.path for issue in report.errors] == ["/id"]
    assert not Guardrail.objects.exists()


def test_an_id_that_names_no_route_is_saved_and_read_at_its_url(api: Any, alice: Any) -> None:
    client = api(alice)
    assert client.post(f"{URL}?tenant=acme", make_guardrail("previews"), format="json").status_code == 201
    assert client.get(f"{URL}/previews").json()["id"] == "previews"
    assert signed_in(alice).get("/guardrails/previews/").status_code == 200


def test_the_engine_accepts_them_as_the_wire_contract_does(tmp_path: Path) -> None:
    documents = [make_guardrail(guardrail_id) for guardrail_id in sorted(ROUTE_IDS)]
    status, out, _ = run(run_validate_guardrail, write(tmp_path / "g.json", documents))
    assert status == 0 and out.count(": ok") == len(ROUTE_IDS)
