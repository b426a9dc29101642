"""Guardrails over REST: authoring with revisions, validation, export, checks, schemas."""

from __future__ import annotations

from typing import Any

import pytest

from guardrails.models import Guardrail, GuardrailRevision
from guardrails.services import Author, save_guardrail
from kindgi_console.tenancy.models import ApiKey, Tenant
from tests.conftest import make_guardrail

URL = "/api/v1/guardrails"

#: Keys in an unusual order and a float that looks like an int: both must come back as sent.
AUTHORED = {
    "severity": "warn",
    "id": "max-calls",
    "kind": "zero-llm",
    "check": "max-tool-calls",
    "config": {"max": 3, "tool": "search"},
    "action": {"on-violation": "retry", "retry": {"maxAttempts": 2}},
    "scope": {"when": "runtime-only", "agents": ["support-bot"], "tenants": []},
    "budget": {"maxCostUsd": 1.0},
    "description": "Sparingly \u00e9\u00e8 \U0001f600",
}


def create(client: Any, document: dict[str, Any], query: str = "") -> Any:
    return client.post(URL + query, data=document, format="json")


def test_an_author_creates_a_guardrail_exactly_as_authored(api: Any, alice: Any) -> None:
    client = api(alice)
    response = create(client, AUTHORED)
    assert response.status_code == 201
    assert response.json() == AUTHORED
    assert response["ETag"] == '"max-calls@1"'
    assert client.get(f"{URL}/max-calls").json() == AUTHORED
    assert list(client.get(f"{URL}/max-calls").json()) == list(AUTHORED)
    stored = Guardrail.objects.get()
    assert (stored.kind, stored.check_name, stored.severity, stored.on_violation, stored.enabled) == (
        "zero-llm",
        "max-tool-calls",
        "warn",
        "retry",
        True,
    )
    revision = GuardrailRevision.objects.get()
    assert (revision.number, revision.created_by, revision.created_by_label) == (1, alice, "alice")


def test_the_export_round_trips_without_loss(api: Any, author_key: str) -> None:
    create(api(author_key), AUTHORED)
    create(api(author_key), make_guardrail())
    exported = api(author_key).get(f"{URL}/export").json()
    assert exported == [AUTHORED, make_guardrail()]
    for document in exported:  # importing the export again changes nothing but the revision
        assert api(author_key).put(f"{URL}/{document['id']}", data=document, format="json").json() == document
    assert api(author_key).get(f"{URL}/export").json() == exported


def test_the_export_holds_only_enabled_guardrails(api: Any, alice: Any, author_key: str) -> None:
    create(api(alice), AUTHORED, "?enabled=false")
    create(api(alice), make_guardrail())
    assert [g["id"] for g in api(author_key).get(f"{URL}/export").json()] == ["no-refunds"]


def test_every_save_is_a_revision(api: Any, alice: Any, author_key: str) -> None:
    create(api(alice), make_guardrail())
    changed = make_guardrail(severity="warn")
    response = api(author_key).put(f"{URL}/no-refunds", data=changed, format="json")
    assert response.status_code == 200 and response["ETag"] == '"no-refunds@2"'
    revisions = api(alice).get(f"{URL}/no-refunds/revisions").json()["results"]
    assert [(r["number"], r["createdBy"], r["document"]["severity"]) for r in revisions] == [
        (2, ApiKey.objects.get().label, "warn"),
        (1, "alice", "critical"),
    ]


def test_deleting_keeps_the_history_and_the_id_can_come_back(api: Any, alice: Any) -> None:
    client = api(alice)
    create(client, make_guardrail())
    assert client.delete(f"{URL}/no-refunds").status_code == 204
    assert client.get(f"{URL}/no-refunds").status_code == 404
    assert client.get(URL).json()["results"] == []
    assert GuardrailRevision.objects.count() == 1
    assert len(client.get(f"{URL}/no-refunds/revisions").json()["results"]) == 1
    assert create(client, make_guardrail()).status_code == 201
    assert client.get(f"{URL}/no-refunds")["ETag"] == '"no-refunds@2"'


def test_an_existing_id_is_409(api: Any, alice: Any) -> None:
    create(api(alice), make_guardrail())
    response = create(api(alice), make_guardrail())
    assert response.status_code == 409
    assert response.json()["errors"][0]["path"] == "/id"


def test_an_invalid_guardrail_is_400_with_every_error(api: Any, alice: Any) -> None:
    document = make_guardrail(action={}, severity="loud")
    response = create(api(alice), document)
    assert response.status_code == 400
    paths = {error["path"] for error in response.json()["errors"]}
    assert {"/action/on-violation", "/severity"} <= paths or {"/action", "/severity"} <= paths
    assert not Guardrail.objects.exists()


def test_a_config_the_check_refuses_is_400_under_config(api: Any, alice: Any) -> None:
    response = create(api(alice), make_guardrail(config={"tools": []}))
    assert response.status_code == 400
    assert response.json()["errors"][0]["path"].startswith("/config")


def test_put_must_keep_the_id(api: Any, alice: Any) -> None:
    create(api(alice), make_guardrail())
    response = api(alice).put(f"{URL}/no-refunds", data=make_guardrail("other"), format="json")
    assert response.status_code == 400
    assert response.json()["errors"][0]["path"] == "/id"


def test_put_on_an_unknown_guardrail_is_404(api: Any, alice: Any) -> None:
    response = api(alice).put(f"{URL}/nothing", data=make_guardrail("nothing"), format="json")
    assert response.status_code == 404


def test_put_can_switch_a_guardrail_off(api: Any, alice: Any) -> None:
    create(api(alice), make_guardrail())
    api(alice).put(f"{URL}/no-refunds?enabled=false", data=make_guardrail(), format="json")
    assert Guardrail.objects.get().enabled is False
    listed = api(alice).get(URL).json()["results"][0]
    assert (listed["id"], listed["enabled"], listed["revision"]) == ("no-refunds", False, 2)


def test_validate_saves_nothing(api: Any, bob: Any) -> None:
    client = api(bob)
    ok = client.post(f"{URL}/validate", data=make_guardrail(), format="json").json()
    assert ok == {"valid": True, "errors": [], "warnings": []}
    bad = client.post(f"{URL}/validate", data=make_guardrail(check="no-such-check"), format="json").json()
    assert bad["valid"] is False and bad["errors"][0]["path"] == "/check"
    assert not Guardrail.objects.exists()


@pytest.mark.parametrize("method", ["post", "put", "delete"])
def test_a_reviewer_cannot_write_guardrails(api: Any, alice: Any, bob: Any, method: str) -> None:
    create(api(alice), make_guardrail())
    url = URL if method == "post" else f"{URL}/no-refunds"
    response = getattr(api(bob), method)(url, data=make_guardrail(), format="json")
    assert response.status_code == 403
    assert "author" in response.json()["errors"][0]["message"]
    assert Guardrail.objects.get().revision == 1


def test_a_runtime_key_cannot_write_guardrails(api: Any, acme_key: str) -> None:
    assert create(api(acme_key), make_guardrail()).status_code == 403


def test_charlie_reads_the_console_wide_guardrails_but_writes_nothing_of_acme(
    api: Any, alice: Any, charlie: Any, charlie_key: str
) -> None:
    """charlie (author in globex) reads the console-wide guardrails, not acme's own; his
    runtime key cannot write them, and nothing of acme shows through them."""
    create(api(alice), make_guardrail("acme-only"))
    save_guardrail(make_guardrail(), Author(user=alice, label="alice"))  # console-wide, of old
    assert api(charlie_key).get(f"{URL}/no-refunds").status_code == 200
    assert api(charlie_key).get(f"{URL}/acme-only").status_code == 404
    assert create(api(charlie_key), make_guardrail("x")).status_code == 403
    revisions = api(charlie).get(f"{URL}/no-refunds/revisions").json()["results"]
    assert revisions[0]["createdBy"] == "a person of another tenant"
    assert api(alice).get(f"{URL}/no-refunds/revisions").json()["results"][0]["createdBy"] == "alice"


def test_an_unknown_guardrail_is_404(api: Any, alice: Any) -> None:
    assert api(alice).get(f"{URL}/nothing").status_code == 404
    assert api(alice).get(f"{URL}/nothing/revisions").status_code == 404
    assert api(alice).delete(f"{URL}/nothing").status_code == 404


def test_without_credentials_guardrails_are_401(api: Any, db: Any) -> None:
    for url in (URL, f"{URL}/export", "/api/v1/checks"):
        assert api().get(url).status_code == 401


def test_a_wrong_method_is_405_in_the_error_shape(api: Any, alice: Any) -> None:
    response = api(alice).patch(f"{URL}/export", data={}, format="json")
    assert response.status_code == 405
    assert response.json()["errors"][0]["message"]


def test_it_lists_the_check_registry(api: Any, charlie_key: str) -> None:
    checks = {c["id"]: c for c in api(charlie_key).get("/api/v1/checks").json()}
    assert {
        "must-cite",
        "never-call-tool",
        "max-tool-calls",
        "output-matches",
        "tool-order",
        "required-substring",
        "forbidden-substring",
    } <= set(checks)
    never = checks["never-call-tool"]
    assert never["kind"] == "zero-llm" and never["builtin"] is True and never["pack"] is None
    assert never["configSchema"]["required"] == ["tools"]


@pytest.mark.parametrize("name", ["guardrail", "runtrace"])
def test_the_schemas_are_published(api: Any, db: Any, name: str) -> None:
    response = api().get(f"/api/v1/schemas/{name}.schema.json")
    assert response.status_code == 200
    assert response.json()["$schema"].startswith("https://json-schema.org/draft/2020-12")


def test_the_openapi_description_and_its_page_are_served_locally(api: Any, db: Any) -> None:
    schema = api().get("/api/schema/?format=json")
    assert schema.status_code == 200
    assert "/api/v1/traces" in schema.json()["paths"]
    page = api().get("/api/docs/").content.decode()
    assert "swagger-ui" in page
    assert "//cdn" not in page and "unpkg" not in page and "jsdelivr" not in page


def test_the_tenant_list_of_a_guardrail_scopes_it(api: Any, author_key: str, acme: Tenant) -> None:
    document = make_guardrail(scope={"tenants": ["globex"]})
    assert create(api(author_key), document).json()["scope"] == {"tenants": ["globex"]}


@pytest.mark.parametrize(
    ("field", "value", "path"),
    [
        ("id", "x" * 201, "/id"),
        ("name", "n" * 301, "/name"),
        ("action", {"on-violation": "v" * 101}, "/action/on-violation"),
        ("id", "sec/slash", "/id"),
        ("id", "has space", "/id"),
        ("id", "-starts-with-a-dash", "/id"),
        ("id", "..", "/id"),
    ],
)
def test_what_the_database_cannot_hold_is_a_400_at_its_field(
    api: Any, author_key: str, field: str, value: Any, path: str
) -> None:
    document = make_guardrail(**{field: value})
    response = create(api(author_key), document)
    assert response.status_code == 400
    assert path in [error["path"] for error in response.json()["errors"]]
    validated = api(author_key).post(f"{URL}/validate", data=document, format="json").json()
    assert not validated["valid"] and path in [e["path"] for e in validated["errors"]]
    assert not Guardrail.objects.exists()


@pytest.mark.parametrize("guardrail_id", ["demo.max-citations", "team:rule_1", "A" * 200, "x"])
def test_every_accepted_id_works_on_every_page_and_url(
    api: Any, client: Any, alice: Any, author_key: str, guardrail_id: str
) -> None:
    assert create(api(alice), make_guardrail(guardrail_id)).status_code == 201
    client.force_login(alice)
    for url in (
        "/",
        "/guardrails/",
        f"/guardrails/{guardrail_id}/",
        f"/guardrails/{guardrail_id}/edit/",
        f"/guardrails/{guardrail_id}/diff/",
        f"/guardrails/export.json?guardrail={guardrail_id}",
    ):
        assert client.get(url).status_code == 200, url
    assert api(author_key).get(f"{URL}/{guardrail_id}/revisions").status_code == 200
    assert api(author_key).delete(f"{URL}/{guardrail_id}").status_code == 204


def test_the_openapi_description_names_every_query_parameter_and_error(api: Any, db: Any) -> None:
    paths = api().get("/api/schema/?format=json").json()["paths"]
    names = {
        path: {p["name"] for p in paths[path]["get"].get("parameters", [])}
        for path in ("/api/v1/ledger", "/api/v1/evaluations/estimate")
    }
    assert {"group_by", "guardrail", "tenant", "model", "since", "until"} <= names["/api/v1/ledger"]
    assert {"guardrails", "tenant", "agent", "flow", "since", "until"} <= names["/api/v1/evaluations/estimate"]
    assert "400" in paths["/api/v1/guardrails/{guardrail_id}/revisions"]["get"]["responses"]
    started = paths["/api/v1/evaluations"]["post"]
    assert "Idempotency-Key" in {p["name"] for p in started["parameters"]}
    assert {"415", "429", "503"} <= set(started["responses"])


def test_a_guardrail_stored_before_the_id_alphabet_still_works(
    api: Any, client: Any, admin_user: Any, acme: Tenant, author_key: str
) -> None:
    """`sec/slash` was accepted once: the pages answered 500 for every tenant and the API
    could not delete it."""
    save_guardrail(make_guardrail("sec/slash"), Author(user=None, label="before"))
    client.force_login(admin_user)
    for url in (
        "/",
        "/guardrails/",
        "/guardrails/sec/slash/",
        "/guardrails/sec/slash/edit/",
        "/guardrails/sec/slash/diff/",
    ):
        assert client.get(url).status_code == 200, url
    assert api(author_key).get(f"{URL}/sec/slash/revisions").status_code == 200
    assert api(author_key).get(f"{URL}/sec/slash").json()["id"] == "sec/slash"
    assert api(author_key).delete(f"{URL}/sec/slash").status_code == 204
