"""Reading the audit log (API, page, CSV) and its append-only table."""

from __future__ import annotations

import csv
import io
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import connection, transaction
from django.db.utils import IntegrityError, InternalError, ProgrammingError
from django.utils import timezone

from kindgi_console.audit import log as audit
from kindgi_console.audit.models import AuditEntry
from kindgi_console.audit.retention import purge_older_than
from kindgi_console.tenancy.models import ApiKey
from tests.conftest import member, signed_in

pytestmark = pytest.mark.django_db


def entries(tenant: Any, count: int, action: str = "guardrail.update", actor: str = "recorder") -> None:
    with transaction.atomic():
        for n in range(count):
            audit.record(
                action,
                tenant=tenant,
                object_id=f"g-{n}",
                object_repr=f"g-{n}",
                before={"severity": "warn"},
                after={"severity": "critical"},
                actor=actor,
            )


@pytest.fixture
def dora(acme: Any) -> User:
    return member("dora", acme, "admin")


@pytest.fixture
def gina(globex: Any) -> User:
    return member("gina", globex, "admin")


def test_the_trigger_refuses_update_and_delete_even_with_the_retention_setting_for_update(acme: Any) -> None:
    entries(acme, 2)
    old = AuditEntry.objects.order_by("pk").first()
    changes: list[Callable[[], object]] = [lambda: AuditEntry.objects.filter(pk=old.pk).update(actor="someone else")]
    if connection.vendor == "postgresql":  # SQLite refuses UPDATE only (see kindgi_console/audit/sqlite.py)
        changes.append(lambda: AuditEntry.objects.filter(pk=old.pk).delete())
    for change in changes:
        with (
            pytest.raises((InternalError, ProgrammingError, IntegrityError), match="append-only"),
            transaction.atomic(),
        ):
            change()
    # even the retention's setting does not allow UPDATE (PostgreSQL; SQLite has no such setting)
    with (
        connection.cursor() as cursor,
        pytest.raises((InternalError, ProgrammingError, IntegrityError)),
        transaction.atomic(),
    ):
        if connection.vendor == "postgresql":
            cursor.execute("SET LOCAL kindgi.audit_retention = 'on'")
        cursor.execute("UPDATE audit_auditentry SET actor = 'forged'")
    assert AuditEntry.objects.count() == 2
    assert AuditEntry.objects.get(pk=old.pk).actor == "recorder"


def test_retention_deletes_only_entries_older_than_the_cut_off(acme: Any) -> None:
    entries(acme, 1)
    with transaction.atomic():
        AuditEntry.objects.create(
            tenant=acme,
            actor="x",
            action="guardrail.update",
            object_type="guardrail",
            created_at=timezone.now() - timedelta(days=400),
        )
    assert purge_older_than(365) == 1
    assert AuditEntry.objects.count() == 1


def test_record_refuses_to_run_outside_a_transaction(acme: Any, settings: Any) -> None:
    # pytest-django wraps this test in a transaction; take it away for the call.
    connection.in_atomic_block, saved = False, connection.in_atomic_block
    try:
        with pytest.raises(RuntimeError, match="inside the change's transaction"):
            audit.record("guardrail.update", tenant=acme)
    finally:
        connection.in_atomic_block = saved


def test_a_tenant_admin_reads_their_tenants_entries_filtered_and_paginated(
    acme: Any, globex: Any, dora: Any, api: Any
) -> None:
    entries(acme, 5, actor="alice")
    entries(acme, 2, "apikey.create", actor="bob")
    entries(globex, 3)
    with transaction.atomic():
        audit.record("judgemodel.create", tenant=None, object_id="mini")
    client = api(dora)
    first = client.get("/api/v1/audit?limit=4").json()
    assert len(first["results"]) == 4 and {e["tenant"] for e in first["results"]} == {"acme"}
    second = client.get(first["next"]).json()
    assert len(second["results"]) == 3 and second["next"] is None
    keys = client.get("/api/v1/audit?object_type=apikey").json()["results"]
    assert [e["actor"] for e in keys] == ["bob", "bob"]
    assert keys[0]["changes"] == {"severity": ["warn", "critical"]}
    assert client.get("/api/v1/audit?since=yesterday").status_code == 400


def test_a_superuser_reads_everything_including_console_wide_entries(acme: Any, globex: Any, api: Any) -> None:
    entries(acme, 1)
    entries(globex, 1)
    with transaction.atomic():
        audit.record("judgemodel.create", tenant=None, object_id="mini")
    root = User.objects.create_superuser("root", "r@example.org", "correct horse 42")
    assert len(api(root).get("/api/v1/audit").json()["results"]) == 3


def test_charlie_and_non_admins_get_nothing_of_acmes_log(
    acme: Any, globex: Any, alice: Any, bob: Any, charlie: Any, gina: Any, api: Any
) -> None:
    entries(acme, 3)
    for who in (alice, bob, charlie):
        assert api(who).get("/api/v1/audit").status_code == 403  # admins only
    assert api(gina).get("/api/v1/audit").json()["results"] == []
    assert api(gina).get("/api/v1/audit?tenant=acme").json()["results"] == []
    _, acme_runtime = ApiKey.issue(scopes=["read", "author"], tenant=acme)
    assert api(acme_runtime).get("/api/v1/audit").status_code == 403
    _, globex_auditor = ApiKey.issue(scopes=["audit"], tenant=globex)
    assert api(globex_auditor).get("/api/v1/audit").json()["results"] == []
    _, acme_auditor = ApiKey.issue(scopes=["audit"], tenant=acme)
    assert len(api(acme_auditor).get("/api/v1/audit").json()["results"]) == 3
    for who in (alice, charlie):
        assert signed_in(who).get("/manage/audit/").status_code == 404
    page = signed_in(gina).get("/manage/audit/?tenant=acme")
    assert b"g-0" not in page.content


def test_the_page_filters_pages_and_exports_csv(acme: Any, dora: Any, settings: Any) -> None:
    entries(acme, 30, actor="alice")
    client = signed_in(dora)
    page = client.get("/manage/audit/?size=25")
    assert page.status_code == 200 and page.content.count(b"guardrail.update</span>") == 25
    assert b'rel="next"' in page.content
    filtered = client.get("/manage/audit/?object_id=g-7")
    assert filtered.content.count(b"guardrail.update</span>") == 1
    exported = client.get("/manage/audit/?format=csv&actor=alice")
    assert exported["Content-Type"].startswith("text/csv")
    rows = list(csv.reader(io.StringIO(exported.getvalue().decode())))
    assert rows[0][:4] == ["created_at", "tenant", "actor", "action"] and len(rows) == 31
    assert rows[1][7] == '{"severity": ["warn", "critical"]}'


def test_the_csv_export_defuses_formulas(acme: Any, dora: Any) -> None:
    with transaction.atomic():
        audit.record("guardrail.create", tenant=acme, object_id="=HYPERLINK(1)", object_repr="@SUM(A1)")
    exported = signed_in(dora).get("/manage/audit/?format=csv")
    (row,) = list(csv.reader(io.StringIO(exported.getvalue().decode())))[1:]
    assert (row[5], row[6]) == ("'=HYPERLINK(1)", "'@SUM(A1)")


def test_the_page_filter_bar_is_the_api_filter(acme: Any, dora: Any) -> None:
    entries(acme, 3, actor="alice")
    client = signed_in(dora)
    page = client.get("/manage/audit/?tenant=acme&action=&since=&until=")  # as the bar submits
    body = page.content.decode()
    assert page.status_code == 200 and body.count("guardrail.update</span>") == 3
    assert '<option value="acme" selected>acme</option>' in body and 'name="actor"' in body
    bad = client.get("/manage/audit/?since=yesterday")
    assert bad.status_code == 400 and "field__error" in bad.content.decode()
    assert b"guardrail.update</span>" not in bad.content
