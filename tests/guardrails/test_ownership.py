"""Guardrail ownership: a guardrail belongs to one tenant or to the whole console.

The matrix: the owner tenant (alice, an acme author key), another tenant (charlie, a
globex author key) and a console admin (a superuser, a key bound to no tenant), for
create, update, delete, toggle, import and export; then evaluation (runtime and runs)
and the CI command's `--console` download.
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from guardrails.models import Guardrail
from guardrails.services import Author, save_guardrail
from kindgi_console.tenancy.models import ApiKey, Tenant
from tests.conftest import make_guardrail, make_trace, member
from traces.models import Evaluation

URL = "/api/v1/guardrails"
FIXTURE = Author(user=None, label="fixture")


@pytest.fixture
def acme_author_key(acme: Tenant) -> str:
    return ApiKey.issue(scopes=["author", "read", "evaluate"], tenant=acme, name="acme ci")[1]


@pytest.fixture
def globex_author_key(globex: Tenant) -> str:
    return ApiKey.issue(scopes=["author", "read", "evaluate"], tenant=globex, name="globex ci")[1]


@pytest.fixture
def owned(acme: Tenant, globex: Tenant) -> None:
    """acme's own guardrail, and one of the whole console."""
    save_guardrail(make_guardrail("acme-rule"), FIXTURE, owner=acme)
    save_guardrail(make_guardrail("console-rule"), FIXTURE)


def who(request: Any, name: str) -> Any:
    return request.getfixturevalue(name)


# ---------------------------------------------------------------------------- create


def test_a_tenant_key_creates_a_guardrail_of_its_tenant(api: Any, acme_author_key: str) -> None:
    response = api(acme_author_key).post(URL, data=make_guardrail("mine"), format="json")
    assert response.status_code == 201
    assert Guardrail.objects.get().tenant.slug == "acme"
    assert api(acme_author_key).get(URL).json()["results"][0]["tenant"] == "acme"


def test_an_author_creates_a_guardrail_of_their_tenant(api: Any, alice: Any) -> None:
    assert api(alice).post(URL, data=make_guardrail("mine"), format="json").status_code == 201
    assert Guardrail.objects.get().tenant.slug == "acme"


def test_a_console_admin_creates_a_console_wide_guardrail(api: Any, author_key: str, admin_user: Any) -> None:
    assert api(author_key).post(URL, data=make_guardrail("a"), format="json").status_code == 201
    assert api(admin_user).post(URL, data=make_guardrail("b"), format="json").status_code == 201
    assert list(Guardrail.objects.values_list("tenant", flat=True)) == [None, None]


def test_a_console_admin_may_create_a_tenants_guardrail(api: Any, admin_user: Any, acme: Tenant) -> None:
    response = api(admin_user).post(URL + "?tenant=acme", data=make_guardrail(), format="json")
    assert response.status_code == 201 and Guardrail.objects.get().tenant == acme


def test_a_tenant_key_may_not_name_another_tenant(api: Any, acme_author_key: str, globex: Tenant) -> None:
    response = api(acme_author_key).post(URL + "?tenant=globex", data=make_guardrail(), format="json")
    assert response.status_code == 403 and response.json()["errors"][0]["path"] == "/tenant"
    assert not Guardrail.objects.exists()


@pytest.mark.parametrize("caller", ["alice", "acme_author_key"])
def test_a_tenants_guardrail_may_not_select_another_tenant(api: Any, request: Any, caller: str, globex: Tenant) -> None:
    """The hole: an acme key made a halt guardrail with scope.tenants globex."""
    document = make_guardrail(scope={"tenants": ["acme", "globex"]})
    response = api(who(request, caller)).post(URL, data=document, format="json")
    assert response.status_code == 400
    assert response.json()["errors"][0]["path"] == "/scope/tenants/1"
    assert not Guardrail.objects.exists()


def test_an_id_of_another_tenant_is_taken_without_saying_whose(api: Any, owned: None, globex_author_key: str) -> None:
    response = api(globex_author_key).post(URL, data=make_guardrail("acme-rule"), format="json")
    assert response.status_code == 409
    assert "acme" not in json.dumps(response.json()).replace("acme-rule", "")


# ---------------------------------------------------------------------------- read, update, delete


@pytest.mark.parametrize("caller", ["alice", "acme_author_key", "admin_user", "author_key"])
def test_the_owner_and_console_admins_update_and_delete_a_tenants_guardrail(
    api: Any, request: Any, owned: None, caller: str
) -> None:
    client = api(who(request, caller))
    changed = make_guardrail("acme-rule", severity="warn")
    assert client.put(f"{URL}/acme-rule", data=changed, format="json").status_code == 200
    assert Guardrail.objects.get(guardrail_id="acme-rule").tenant.slug == "acme"  # kept
    assert client.delete(f"{URL}/acme-rule").status_code == 204


@pytest.mark.parametrize("caller", ["charlie", "globex_author_key"])
def test_another_tenant_sees_and_changes_nothing_of_a_tenants_guardrail(
    api: Any, request: Any, owned: None, caller: str
) -> None:
    client = api(who(request, caller))
    assert client.get(f"{URL}/acme-rule").status_code == 404
    assert client.get(f"{URL}/acme-rule/revisions").status_code == 404
    changed = make_guardrail("acme-rule", severity="warn")
    assert client.put(f"{URL}/acme-rule", data=changed, format="json").status_code == 404
    assert client.delete(f"{URL}/acme-rule").status_code == 404
    assert [g["id"] for g in client.get(URL).json()["results"]] == ["console-rule"]
    assert [g["id"] for g in client.get(f"{URL}/export").json()] == ["console-rule"]
    guardrail = Guardrail.objects.get(guardrail_id="acme-rule")
    assert guardrail.revision == 1 and guardrail.deleted_at is None


@pytest.mark.parametrize("caller", ["alice", "acme_author_key", "charlie"])
def test_only_console_admins_change_a_console_wide_guardrail(api: Any, request: Any, owned: None, caller: str) -> None:
    client = api(who(request, caller))
    assert client.get(f"{URL}/console-rule").status_code == 200
    changed = make_guardrail("console-rule", severity="warn")
    assert client.put(f"{URL}/console-rule", data=changed, format="json").status_code == 403
    assert client.delete(f"{URL}/console-rule").status_code == 403
    assert Guardrail.objects.get(guardrail_id="console-rule").revision == 1


def test_a_console_admin_changes_a_console_wide_guardrail(api: Any, owned: None, author_key: str) -> None:
    changed = make_guardrail("console-rule", severity="warn")
    assert api(author_key).put(f"{URL}/console-rule", data=changed, format="json").status_code == 200
    assert api(author_key).delete(f"{URL}/console-rule").status_code == 204


def test_the_owner_exports_the_console_wide_and_its_own(api: Any, owned: None, acme_author_key: str) -> None:
    exported = api(acme_author_key).get(f"{URL}/export").json()
    assert [g["id"] for g in exported] == ["acme-rule", "console-rule"]
    assert exported[0]["scope"]["tenants"] == ["acme"]  # CI applies it to acme's traces only
    assert "scope" not in exported[1]


def test_a_console_admin_exports_every_guardrail(api: Any, owned: None, author_key: str) -> None:
    assert [g["id"] for g in api(author_key).get(f"{URL}/export").json()] == ["acme-rule", "console-rule"]


def test_revision_authors_of_another_tenants_key_are_not_shown(
    api: Any, acme: Tenant, acme_author_key: str, charlie: Any, globex_author_key: str
) -> None:
    key = ApiKey.objects.get(tenant=acme)
    save_guardrail(make_guardrail(), Author(user=None, label=key.label))  # before owners
    for caller in (charlie, globex_author_key):
        revisions = api(caller).get(f"{URL}/no-refunds/revisions").json()["results"]
        assert revisions[0]["createdBy"] == "an API key of another tenant"
    revisions = api(acme_author_key).get(f"{URL}/no-refunds/revisions").json()["results"]
    assert revisions[0]["createdBy"] == key.label


def test_pages_do_not_name_revision_authors_of_another_tenant(
    client: Any, acme: Tenant, acme_author_key: str, charlie: Any
) -> None:
    key = ApiKey.objects.get(tenant=acme)
    save_guardrail(make_guardrail(), Author(user=None, label=key.label))
    signed_in(client, charlie)
    for url in ("/guardrails/no-refunds/", "/guardrails/no-refunds/diff/?from=1&to=1"):
        content = client.get(url).content.decode()
        assert key.label not in content and "an API key of another tenant" in content


# ---------------------------------------------------------------------------- pages


def signed_in(client: Any, user: Any) -> Any:
    client.force_login(user)
    return client


@pytest.mark.parametrize("action", ["toggle", "delete"])
def test_pages_let_the_owner_toggle_and_delete(client: Any, alice: Any, owned: None, action: str) -> None:
    response = signed_in(client, alice).post(f"/guardrails/acme-rule/{action}/", {"enabled": "false"})
    assert response.status_code == 302
    guardrail = Guardrail.objects.get(guardrail_id="acme-rule")
    assert not guardrail.enabled or guardrail.deleted_at is not None


@pytest.mark.parametrize("action", ["toggle", "delete"])
def test_pages_hide_a_tenants_guardrail_from_another_tenant(
    client: Any, charlie: Any, owned: None, action: str
) -> None:
    signed_in(client, charlie)
    assert client.post(f"/guardrails/acme-rule/{action}/", {"enabled": "false"}).status_code == 404
    assert client.get("/guardrails/acme-rule/").status_code == 404
    assert client.get("/guardrails/acme-rule/edit/").status_code == 404
    assert b"acme-rule" not in client.get("/guardrails/").content
    assert [g["id"] for g in json.loads(client.get("/guardrails/export.json").content)] == ["console-rule"]
    guardrail = Guardrail.objects.get(guardrail_id="acme-rule")
    assert guardrail.enabled and guardrail.deleted_at is None


@pytest.mark.parametrize("action", ["toggle", "delete"])
def test_pages_let_only_console_admins_change_a_console_wide_guardrail(
    client: Any, alice: Any, admin_user: Any, owned: None, action: str
) -> None:
    url = f"/guardrails/console-rule/{action}/"
    assert signed_in(client, alice).post(url, {"enabled": "false"}).status_code == 403
    assert client.get("/guardrails/console-rule/edit/").status_code == 403
    assert signed_in(client, admin_user).post(url, {"enabled": "false"}).status_code == 302


def upload(document: object) -> SimpleUploadedFile:
    return SimpleUploadedFile("g.json", json.dumps(document).encode(), "application/json")


def test_import_makes_the_guardrails_of_the_current_tenant(client: Any, alice: Any) -> None:
    response = signed_in(client, alice).post("/guardrails/import/", {"files": [upload(make_guardrail())]})
    assert response.status_code == 200
    assert Guardrail.objects.get().tenant.slug == "acme"


def test_import_by_a_console_admin_makes_console_wide_guardrails(client: Any, admin_user: Any, acme: Tenant) -> None:
    response = signed_in(client, admin_user).post("/guardrails/import/", {"files": [upload(make_guardrail())]})
    assert response.status_code == 200 and Guardrail.objects.get().tenant is None


@pytest.mark.parametrize("guardrail_id", ["acme-rule", "console-rule"])
def test_import_changes_nothing_the_importer_may_not_write(
    client: Any, charlie: Any, owned: None, guardrail_id: str
) -> None:
    document = make_guardrail(guardrail_id, severity="warn")
    response = signed_in(client, charlie).post("/guardrails/import/", {"files": [upload(document)]})
    assert response.status_code == 400
    errors = response.context["reports"][0].guardrails[0].errors
    assert errors[0].path == "/id"
    assert Guardrail.objects.get(guardrail_id=guardrail_id).revision == 1


def test_import_refuses_another_tenant_in_the_scope(client: Any, alice: Any, globex: Tenant) -> None:
    document = make_guardrail(scope={"tenants": ["globex"]})
    response = signed_in(client, alice).post("/guardrails/import/", {"files": [upload(document)]})
    assert response.status_code == 400
    assert response.context["reports"][0].guardrails[0].errors[0].path == "/scope/tenants/0"
    assert not Guardrail.objects.exists()


# ---------------------------------------------------------------------------- evaluation


def test_a_tenants_guardrail_applies_at_runtime_to_its_tenants_traces_only(
    api: Any, owned: None, acme_key: str, charlie_key: str
) -> None:
    """Both guardrails halt a refund: globex's turn sees only the console-wide one."""
    globex = api(charlie_key).post("/api/v1/evaluate", data=make_trace("g1"), format="json").json()
    assert [r["guardrail"] for r in globex["results"]] == ["console-rule"]
    acme = api(acme_key).post("/api/v1/evaluate", data=make_trace("a1"), format="json").json()
    assert [r["guardrail"] for r in acme["results"]] == ["acme-rule", "console-rule"]


def test_ingestion_applies_a_tenants_guardrail_to_its_own_traces_only(
    api: Any, owned: None, acme_key: str, charlie_key: str, django_capture_on_commit_callbacks: Any
) -> None:
    from traces.models import EvaluationResult

    with django_capture_on_commit_callbacks(execute=True):
        for key, trace_id in ((charlie_key, "g1"), (acme_key, "a1")):
            response = api(key).post("/api/v1/traces", data=make_trace(trace_id), format="json")
            assert response.status_code == 201
    rows = set(EvaluationResult.objects.values_list("trace__tenant__slug", "guardrail__guardrail_id"))
    assert rows == {("globex", "console-rule"), ("acme", "console-rule"), ("acme", "acme-rule")}


def test_a_run_applies_only_the_console_wide_and_the_tenants_own(
    api: Any, owned: None, globex_author_key: str, acme_author_key: str
) -> None:
    body = {"guardrails": ["acme-rule"]}
    refused = api(globex_author_key).post("/api/v1/evaluations", data=body, format="json")
    assert refused.status_code == 400 and refused.json()["errors"][0]["path"] == "/guardrails/0"
    started = api(globex_author_key).post("/api/v1/evaluations", data={}, format="json")
    assert started.status_code == 202
    assert Evaluation.objects.get(pk=started.json()["id"]).guardrails == ["console-rule"]
    mine = api(acme_author_key).post("/api/v1/evaluations", data={}, format="json")
    assert Evaluation.objects.get(pk=mine.json()["id"]).guardrails == ["acme-rule", "console-rule"]


def test_the_run_page_offers_only_the_guardrails_of_the_tenant(client: Any, charlie: Any, owned: None) -> None:
    content = signed_in(client, charlie).get("/evaluations/new/").content
    assert b"console-rule" in content and b"acme-rule" not in content


# ---------------------------------------------------------------------------- CI --console


def test_ci_downloads_what_production_enforces_for_the_tenant(
    live_server: Any, owned: None, acme_author_key: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from guardrails.engine.cli import run_guardrail_ci

    traces = tmp_path / "t.jsonl"
    traces.write_text("\n".join(json.dumps(make_trace(f"t-{slug}", tenant=slug)) for slug in ("acme", "globex")) + "\n")
    monkeypatch.setenv("KINDGI_API_KEY", acme_author_key)
    out, err = io.StringIO(), io.StringIO()
    status = run_guardrail_ci(["--console", live_server.url, "--traces", str(traces), "--format", "json"], out, err)
    report = json.loads(out.getvalue())
    verdicts = {(r["guardrail"], r["trace"]): r["status"] for r in report["results"]}
    assert status == 1
    assert verdicts == {
        ("acme-rule", "t-acme"): "fail",
        ("acme-rule", "t-globex"): "skipped",
        ("console-rule", "t-acme"): "fail",
        ("console-rule", "t-globex"): "fail",
    }


@pytest.mark.parametrize("url", ["/violations/", "/ledger/", "/evaluations/new/", "/guardrails/"])
def test_no_page_names_another_tenants_guardrail(client: Any, charlie: Any, owned: None, url: str) -> None:
    content = signed_in(client, charlie).get(url).content
    assert b"acme-rule" not in content


def test_the_overview_counts_the_guardrails_enforced_on_the_tenant(
    client: Any, alice: Any, charlie: Any, owned: None
) -> None:
    assert signed_in(client, charlie).get("/").context["guardrails_enabled"] == 1
    assert signed_in(client, alice).get("/").context["guardrails_enabled"] == 2


def test_the_pages_say_whom_a_guardrail_belongs_to(client: Any, alice: Any, owned: None) -> None:
    signed_in(client, alice)
    assert b"acme's own" in client.get("/guardrails/").content
    assert b"the whole console" in client.get("/guardrails/console-rule/").content
    assert b"(its traces only)" in client.get("/guardrails/acme-rule/").content


def test_import_refuses_a_current_tenant_the_person_only_reviews(client: Any, alice: Any, globex: Tenant) -> None:
    from kindgi_console.tenancy.models import Membership

    Membership.objects.create(user=alice, tenant=globex, role="reviewer")
    signed_in(client, alice)
    client.post("/switch-tenant/", {"tenant": "globex"})
    response = client.post("/guardrails/import/", {"files": [upload(make_guardrail())]})
    assert response.status_code == 403 and not Guardrail.objects.exists()


def test_an_author_opening_a_console_wide_guardrails_edit_page_reads_who_changes_it(
    owned: None, alice: Any, dana: Any, client: Any
) -> None:
    """Not "ask an author or an admin of this tenant": no tenant role changes it."""
    for user in (alice, dana):
        response = signed_in(client, user).get("/guardrails/console-rule/edit/")
        assert response.status_code == 403
        page = response.content.decode()
        assert "A console admin changes console-wide guardrails" in page
        assert "Ask an author or an admin of this tenant" not in page
    # Any other refusal keeps its own advice.
    rita = member("rita", Tenant.objects.get(slug="acme"), "reviewer")
    response = signed_in(client, rita).get("/guardrails/new/")
    assert response.status_code == 403
    assert "Ask an author or an admin of this tenant" in response.content.decode()
