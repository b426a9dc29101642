"""Changes made on Django's admin site are in the audit log too; the log there is read-only."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client

from kindgi_console.audit.models import AuditEntry
from kindgi_console.tenancy.models import ApiKey, Membership

pytestmark = pytest.mark.django_db


@pytest.fixture
def root_client() -> Client:
    client = Client()
    client.force_login(User.objects.create_superuser("root", "r@example.org", "correct horse 42"))
    return client


def test_admin_changes_deletions_and_the_revoke_action_are_audited(root_client: Client, alice: Any, acme: Any) -> None:
    membership = Membership.objects.get(user=alice)
    url = f"/admin/tenancy/membership/{membership.pk}/change/"
    answer = root_client.post(url, {"user": alice.pk, "tenant": acme.pk, "role": "admin"})
    assert answer.status_code == 302
    key, _ = ApiKey.issue(scopes=["read"], tenant=acme)
    root_client.post("/admin/tenancy/apikey/", {"action": "revoke", "_selected_action": [key.pk]})
    root_client.post(f"/admin/tenancy/membership/{membership.pk}/delete/", {"post": "yes"})
    entries = list(AuditEntry.objects.order_by("pk").values_list("action", "actor", "changes"))
    assert entries == [
        ("membership.admin-change", "root", {"role": ["author", "admin"]}),
        ("apikey.revoke", "root", {"revoked": [False, True]}),
        (
            "membership.admin-delete",
            "root",
            {
                "id": [membership.pk, None],
                "role": ["admin", None],
                "sso": [False, None],
                "tenant": [acme.pk, None],
                "user": [alice.pk, None],
            },
        ),
    ]
    assert not Membership.objects.exists() and ApiKey.objects.get().revoked


def test_the_admin_shows_the_log_but_cannot_change_it(root_client: Client, acme: Any) -> None:
    root_client.post(
        "/admin/tenancy/tenant/add/",
        {
            "slug": "initech",
            "name": "Initech",
            "created_at_0": "2026-11-30",
            "created_at_1": "10:00:00",
            "memberships-TOTAL_FORMS": "0",
            "memberships-INITIAL_FORMS": "0",
            "reviewer_judge_limit_usd": "1.00",
        },
    )
    entry = AuditEntry.objects.get()
    assert entry.action == "tenant.admin-add" and entry.changes["slug"] == [None, "initech"]
    assert root_client.get("/admin/audit/auditentry/").status_code == 200
    assert root_client.get(f"/admin/audit/auditentry/{entry.pk}/delete/").status_code == 403


def test_tenant_settings_changed_on_the_admin_are_audited(root_client: Client, acme: Any) -> None:
    """The reviewer's judge limit (on the tenant) and its retention policy: one entry each."""
    answer = root_client.post(
        f"/admin/tenancy/tenant/{acme.pk}/change/",
        {
            "slug": "acme",
            "name": "Acme",
            "created_at_0": "2026-11-30",
            "created_at_1": "10:00:00",
            "reviewer_judge_limit_usd": "5.00",
            "memberships-TOTAL_FORMS": "0",
            "memberships-INITIAL_FORMS": "0",
        },
    )
    assert answer.status_code == 302, answer.content[:500]
    answer = root_client.post(
        "/admin/traces/retentionpolicy/add/",
        {"tenant": acme.pk, "days": "30", "updated_at_0": "2026-11-30", "updated_at_1": "10:00:00"},
    )
    assert answer.status_code == 302, answer.content[:500]
    entries = list(AuditEntry.objects.order_by("pk").values_list("action", "tenant_id", "changes"))
    assert [(action, tenant) for action, tenant, _ in entries] == [
        ("tenant.admin-change", acme.pk),
        ("retentionpolicy.admin-add", acme.pk),
    ]
    assert [Decimal(v) for v in entries[0][2]["reviewer_judge_limit_usd"]] == [Decimal(1), Decimal(5)]
    assert entries[1][2]["days"] == [None, 30]
