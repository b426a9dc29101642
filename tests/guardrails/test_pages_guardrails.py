"""The guardrail pages: list, detail, diff, toggle, delete, editor, import and export."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import connection
from django.test.utils import CaptureQueriesContext

from guardrails.models import Guardrail
from guardrails.services import Author, save_guardrail
from tests.conftest import make_guardrail, make_trace

FIXTURE = Author(user=None, label="fixture")


def violate(api: Any, key: str, trace_id: str) -> None:
    """A runtime verdict on a trace calling issue_refund: a violation of no-refunds."""
    response = api(key).post("/api/v1/evaluate", data=make_trace(trace_id), format="json")
    assert response.status_code == 200


def signed_in(client: Any, user: Any) -> Any:
    client.force_login(user)
    return client


# ------------------------------------------------------------------ list


def test_it_lists_guardrails_with_filters(client: Any, alice: Any) -> None:
    save_guardrail(make_guardrail("no-refunds"), FIXTURE)
    save_guardrail(
        make_guardrail(
            "cite-sources",
            name="Cite the sources",
            check="must-cite",
            config={},
            severity="warn",
            action={"on-violation": "log-only"},
        ),
        FIXTURE,
    )
    page = signed_in(client, alice).get("/guardrails/")
    assert page.status_code == 200
    assert b"no-refunds" in page.content and b"cite-sources" in page.content
    for query, shown, hidden in [
        ("check=must-cite", b"cite-sources", b"no-refunds"),
        ("severity=critical", b"no-refunds", b"cite-sources"),
        ("action=log-only", b"cite-sources", b"no-refunds"),
        ("q=cite+the", b"cite-sources", b"no-refunds"),
        ("kind=zero-llm&enabled=yes", b"no-refunds", b"nothing-hidden"),
    ]:
        content = client.get(f"/guardrails/?{query}").content
        assert shown in content and f'href="/guardrails/{hidden.decode()}/"'.encode() not in content, query


def test_it_finds_a_guardrail_by_its_description(client: Any, alice: Any) -> None:
    save_guardrail(make_guardrail("no-refunds", description="Refunds need a human in the loop"), FIXTURE)
    save_guardrail(make_guardrail("other"), FIXTURE)
    content = signed_in(client, alice).get("/guardrails/?q=human+in+the").content
    assert b'href="/guardrails/no-refunds/"' in content
    assert b'href="/guardrails/other/"' not in content


def test_it_hides_disabled_and_deleted_guardrails_on_request(client: Any, alice: Any) -> None:
    off = save_guardrail(make_guardrail("off"), FIXTURE, enabled=False)
    gone = save_guardrail(make_guardrail("gone"), FIXTURE)
    gone.deleted_at = off.updated_at
    gone.save()
    content = signed_in(client, alice).get("/guardrails/?enabled=yes").content
    assert b'href="/guardrails/off/"' not in content
    assert b'href="/guardrails/gone/"' not in signed_in(client, alice).get("/guardrails/").content


def test_it_pages_through_guardrails_by_id(client: Any, alice: Any) -> None:
    for n in range(53):
        save_guardrail(make_guardrail(f"g-{n:03}"), FIXTURE)
    first = signed_in(client, alice).get("/guardrails/")
    assert b"g-049" in first.content and b"g-050" not in first.content
    second = client.get(first.context["next_url"])
    assert b"g-050" in second.content and b"g-052" in second.content
    assert second.context["next_url"] == ""


def test_the_list_counts_open_violations_of_the_current_tenant_only(
    client: Any, api: Any, halt_guardrail: Any, acme_key: str, charlie: Any, alice: Any
) -> None:
    violate(api, acme_key, "r-1")
    violate(api, acme_key, "r-2")
    assert signed_in(client, alice).get("/guardrails/").context["guardrails"][0].open_violations == 2
    assert signed_in(client, charlie).get("/guardrails/").context["guardrails"][0].open_violations == 0


@pytest.mark.parametrize("size", [3, 40])
def test_the_list_takes_a_fixed_number_of_queries(client: Any, alice: Any, api: Any, acme_key: str, size: int) -> None:
    for n in range(size):
        save_guardrail(make_guardrail(f"g-{n:03}"), FIXTURE)
    violate(api, acme_key, "r-1")
    signed_in(client, alice)
    with CaptureQueriesContext(connection) as queries:
        assert client.get("/guardrails/").status_code == 200
    assert len(queries) <= 9  # one of them reads the ids of the tenants alice may read


def test_a_visitor_is_sent_to_sign_in(client: Any, db: Any) -> None:
    response = client.get("/guardrails/")
    assert response.status_code == 302 and response["Location"].startswith("/login/")


def test_a_person_of_no_tenant_may_not_read_guardrails(client: Any, django_user_model: Any) -> None:
    loner = django_user_model.objects.create_user("loner", password="pw-loner-123")
    assert signed_in(client, loner).get("/guardrails/").status_code == 403


# ------------------------------------------------------------------ detail


def test_the_detail_shows_document_summary_revisions_and_violations(
    client: Any, api: Any, halt_guardrail: Any, acme_key: str, alice: Any
) -> None:
    violate(api, acme_key, "run-<b>bold</b>")
    response = signed_in(client, alice).get("/guardrails/no-refunds/")
    assert response.status_code == 200
    content = response.content.decode()
    assert "&quot;check&quot;: &quot;never-call-tool&quot;" in content
    assert "Never refund without a human" in content
    assert "run-&lt;b&gt;bold&lt;/b&gt;" in content and "<b>bold</b>" not in content
    assert len(response.context["violations"]) == 1
    assert response.context["chart"]["evaluated"] == 1
    assert response.context["chart"]["datasets"][0]["data"][-1] == 0.0
    assert 'id="pass-rate-data"' in content and "dist/charts.js" in content


def test_charlie_sees_none_of_acmes_violations_on_the_detail(
    client: Any, api: Any, halt_guardrail: Any, acme_key: str, charlie: Any
) -> None:
    violate(api, acme_key, "r-1")
    response = signed_in(client, charlie).get("/guardrails/no-refunds/")
    assert response.context["violations"] == []
    assert response.context["chart"]["evaluated"] == 0
    assert b"r-1" not in response.content


def test_an_unknown_or_deleted_guardrail_is_404(client: Any, alice: Any, acme_guardrail: Any) -> None:
    signed_in(client, alice)
    assert client.get("/guardrails/nope/").status_code == 404
    client.post("/guardrails/no-refunds/delete/")
    assert client.get("/guardrails/no-refunds/").status_code == 404


def test_a_reviewer_reads_but_sees_no_author_actions(client: Any, bob: Any, halt_guardrail: Any) -> None:
    content = signed_in(client, bob).get("/guardrails/no-refunds/").content
    assert b"/guardrails/no-refunds/edit/" not in content
    assert b"Delete guardrail" not in content


# ------------------------------------------------------------------ diff


def test_it_diffs_two_revisions(client: Any, alice: Any) -> None:
    save_guardrail(make_guardrail(severity="warn"), FIXTURE)
    save_guardrail(make_guardrail(severity="critical"), FIXTURE)
    response = signed_in(client, alice).get("/guardrails/no-refunds/diff/?from=1&to=2")
    assert response.status_code == 200
    rows = [(row.kind, row.text.strip()) for row in response.context["rows"]]
    assert ("del", '"severity": "warn"') in rows and ("add", '"severity": "critical"') in rows
    assert b"diff__line--add" in response.content and b"diff__line--del" in response.content


def test_the_same_revision_has_no_difference(client: Any, alice: Any, halt_guardrail: Any) -> None:
    response = signed_in(client, alice).get("/guardrails/no-refunds/diff/?from=1&to=1")
    assert response.context["rows"] == [] and b"No differences" in response.content


def test_a_missing_revision_is_404(client: Any, alice: Any, halt_guardrail: Any) -> None:
    assert signed_in(client, alice).get("/guardrails/no-refunds/diff/?from=1&to=9").status_code == 404


# ------------------------------------------------------------------ changes


def test_an_author_disables_and_enables_without_a_new_revision(client: Any, alice: Any, acme_guardrail: Any) -> None:
    signed_in(client, alice)
    assert client.post("/guardrails/no-refunds/toggle/", {"enabled": "false"}).status_code == 302
    guardrail = Guardrail.objects.get()
    assert not guardrail.enabled and guardrail.revision == 1
    client.post("/guardrails/no-refunds/toggle/", {"enabled": "true"})
    assert Guardrail.objects.get().enabled


def test_deleting_keeps_the_history(client: Any, alice: Any, acme_guardrail: Any) -> None:
    assert signed_in(client, alice).post("/guardrails/no-refunds/delete/").status_code == 302
    guardrail = Guardrail.objects.get()
    assert guardrail.deleted_at is not None and guardrail.revisions.count() == 1


@pytest.mark.parametrize("url", ["/guardrails/no-refunds/toggle/", "/guardrails/no-refunds/delete/"])
def test_a_reviewer_cannot_change_a_guardrail(client: Any, bob: Any, acme_guardrail: Any, url: str) -> None:
    assert signed_in(client, bob).post(url, {"enabled": "false"}).status_code == 403
    guardrail = Guardrail.objects.get()
    assert guardrail.enabled and guardrail.deleted_at is None


def test_restoring_a_revision_saves_its_document_as_a_new_revision(
    client: Any, alice: Any, acme_guardrail: Any
) -> None:
    first = Guardrail.objects.get().document
    save_guardrail({**first, "severity": "warn"}, FIXTURE)
    response = signed_in(client, alice).post("/guardrails/no-refunds/revisions/1/restore/")
    assert response.status_code == 302
    guardrail = Guardrail.objects.get()
    assert guardrail.revision == 3 and guardrail.document == first
    assert [r.number for r in guardrail.revisions.order_by("number")] == [1, 2, 3]


def test_restoring_needs_the_author_role_and_a_real_revision(
    client: Any, alice: Any, bob: Any, acme_guardrail: Any
) -> None:
    assert signed_in(client, bob).post("/guardrails/no-refunds/revisions/1/restore/").status_code == 403
    assert signed_in(client, alice).post("/guardrails/no-refunds/revisions/9/restore/").status_code == 404
    assert client.get("/guardrails/no-refunds/revisions/1/restore/").status_code == 405
    assert Guardrail.objects.get().revision == 1


def test_toggling_needs_a_post(client: Any, alice: Any, acme_guardrail: Any) -> None:
    assert signed_in(client, alice).get("/guardrails/no-refunds/toggle/").status_code == 405


# ------------------------------------------------------------------ editor


def test_the_editor_mounts_the_bundle_on_the_real_api(client: Any, alice: Any, acme_guardrail: Any) -> None:
    content = signed_in(client, alice).get("/guardrails/no-refunds/edit/").content.decode()
    for attribute in [
        'data-schema-url="/api/v1/schemas/guardrail.schema.json"',
        'data-checks-url="/api/v1/checks"',
        'data-validate-url="/api/v1/guardrails/validate"',
        'data-save-url="/api/v1/guardrails/no-refunds"',
        'data-save-method="PUT"',
        'data-after-save-url="/guardrails/__id__/"',
        'data-try-url="/api/v1/guardrails/try"',
    ]:
        assert attribute in content
    assert 'id="guardrail-initial"' in content and "dist/authoring.js" in content


def test_the_create_page_posts_a_new_guardrail(client: Any, alice: Any) -> None:
    content = signed_in(client, alice).get("/guardrails/new/").content.decode()
    assert 'data-save-url="/api/v1/guardrails?tenant=acme"' in content
    assert 'data-save-method="POST"' in content


def test_a_reviewer_cannot_open_the_editor(client: Any, bob: Any, acme_guardrail: Any) -> None:
    signed_in(client, bob)
    assert client.get("/guardrails/new/").status_code == 403
    assert client.get("/guardrails/no-refunds/edit/").status_code == 403


# ------------------------------------------------------------------ import and export


def upload(name: str, content: object) -> SimpleUploadedFile:
    data = content if isinstance(content, bytes) else json.dumps(content).encode()
    return SimpleUploadedFile(name, data, content_type="application/json")


def test_it_imports_files_and_reports_each_file_and_field(client: Any, alice: Any) -> None:
    bad = make_guardrail("bad", action={"on-violation": ""}, severity="urgent")
    files = [
        upload("one.json", make_guardrail("one")),
        upload("many.json", [make_guardrail("two"), bad]),
        upload("broken.json", b"{not json"),
    ]
    response = signed_in(client, alice).post("/guardrails/import/", {"files": files})
    assert response.status_code == 400
    reports = {report.name: report for report in response.context["reports"]}
    assert [g.status for g in reports["one.json"].guardrails] == ["valid"]
    assert [g.status for g in reports["many.json"].guardrails] == ["valid", "invalid"]
    paths = {issue.path for issue in reports["many.json"].guardrails[1].errors}
    assert {"/action/on-violation", "/severity"} <= paths
    assert "not JSON" in reports["broken.json"].error
    assert b"many.json[1]" in response.content and b"/severity" in response.content
    assert b"0 guardrails saved" in response.content
    assert not Guardrail.objects.exists()  # all or nothing


def test_import_saves_every_guardrail_when_all_are_valid(client: Any, alice: Any, acme: Any) -> None:
    files = [upload("one.json", make_guardrail("one")), upload("many.json", [make_guardrail("two")])]
    response = signed_in(client, alice).post("/guardrails/import/", {"files": files})
    assert response.status_code == 200
    assert [g.status for r in response.context["reports"] for g in r.guardrails] == ["created"] * 2
    assert set(Guardrail.objects.values_list("guardrail_id", "tenant__slug")) == {("one", "acme"), ("two", "acme")}


def test_import_of_a_very_deep_file_is_a_400_not_a_crash(client: Any, alice: Any) -> None:
    deep = b"[" * 100_000 + b"]" * 100_000
    response = signed_in(client, alice).post("/guardrails/import/", {"files": [upload("d.json", deep)]})
    assert response.status_code == 400
    assert "depth" in response.context["reports"][0].error


def test_import_refuses_a_duplicate_key(client: Any, alice: Any) -> None:
    body = b'{"id": "a", "id": "b", "kind": "zero-llm", "check": "must-cite", "action": {"on-violation": "halt"}}'
    response = signed_in(client, alice).post("/guardrails/import/", {"files": [upload("d.json", body)]})
    assert response.status_code == 400
    assert "'id' appears twice" in response.context["reports"][0].error
    assert not Guardrail.objects.exists()


def test_import_reports_a_registration_error_at_its_field(client: Any, alice: Any) -> None:
    wrong = make_guardrail("wrong", config={"tools": "issue_refund"})
    response = signed_in(client, alice).post("/guardrails/import/", {"files": [upload("w.json", wrong)]})
    assert response.status_code == 400
    errors = response.context["reports"][0].guardrails[0].errors
    assert any(issue.path.startswith("/config") for issue in errors)


def test_import_saves_a_new_revision_and_skips_an_unchanged_one(client: Any, alice: Any, acme_guardrail: Any) -> None:
    signed_in(client, alice)
    same = client.post("/guardrails/import/", {"files": [upload("a.json", make_guardrail())]})
    assert same.context["reports"][0].guardrails[0].status == "unchanged"
    changed = client.post("/guardrails/import/", {"files": [upload("a.json", make_guardrail(severity="warn"))]})
    assert changed.status_code == 200
    assert changed.context["reports"][0].guardrails[0].status == "updated"
    guardrail = Guardrail.objects.get()
    assert guardrail.revision == 2
    assert guardrail.revisions.get(number=2).created_by_label == "alice"


def test_import_without_a_file_says_so(client: Any, alice: Any) -> None:
    response = signed_in(client, alice).post("/guardrails/import/", {})
    assert response.status_code == 400 and b"Choose one or more JSON files" in response.content


def test_a_reviewer_cannot_import(client: Any, bob: Any) -> None:
    response = signed_in(client, bob).post("/guardrails/import/", {"files": [upload("a.json", make_guardrail())]})
    assert response.status_code == 403
    assert not Guardrail.objects.exists()


def test_export_round_trips_byte_for_byte(client: Any, admin_user: Any) -> None:
    documents = [
        make_guardrail("zeta", scope={"when": "always", "agents": ["support-bot"]}),
        {
            "severity": "warn",
            "id": "alpha",
            "check": "must-cite",
            "kind": "zero-llm",
            "action": {"on-violation": "log-only"},
            "description": "Ünïcode «kept» as written",
        },
    ]
    for document in documents:
        save_guardrail(document, FIXTURE)
    save_guardrail(make_guardrail("off"), FIXTURE, enabled=False)
    exported = signed_in(client, admin_user).get("/guardrails/export.json")
    assert exported.status_code == 200
    assert exported["Content-Disposition"] == 'attachment; filename="guardrails.json"'
    assert [d["id"] for d in json.loads(exported.content)] == ["alpha", "zeta"]

    for guardrail in Guardrail.objects.all():
        guardrail.revisions.all().delete()
        guardrail.delete()
    response = client.post("/guardrails/import/", {"files": [upload("guardrails.json", exported.content)]})
    assert response.status_code == 200
    again = client.get("/guardrails/export.json")
    assert again.content == exported.content


def test_export_of_one_guardrail(client: Any, alice: Any, halt_guardrail: Any) -> None:
    response = signed_in(client, alice).get("/guardrails/export.json?guardrail=no-refunds")
    assert json.loads(response.content) == make_guardrail()
    assert response["Content-Disposition"] == 'attachment; filename="no-refunds.json"'
    assert client.get("/guardrails/export.json?guardrail=nope").status_code == 404
