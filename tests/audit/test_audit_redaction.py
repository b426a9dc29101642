"""URLs keep no credentials in the audit log: not in the API, not in the CSV, not in old entries."""

from __future__ import annotations

import csv
import importlib
import io
import json
from typing import Any

import pytest
from django.apps import apps
from django.contrib.auth.models import User
from django.db import connection, transaction
from django.db.utils import IntegrityError, InternalError, ProgrammingError

from kindgi_console.audit.models import AuditEntry
from kindgi_console.audit.redaction import redact_url
from kindgi_console.tenancy.models import ApiKey
from tests.conftest import member, signed_in

pytestmark = pytest.mark.django_db

SLACK = "https://hooks.slack.com/services/T0SLACK1/B0SLACK2/slackSECRETtoken"
TOKEN = "https://hooks.example.org/alerts?token=querySECRET&team=7"
USERINFO = "https://bot:userinfoSECRET@hooks.example.org/in"
DISCORD = "https://discord.com/api/webhooks/123456/discordSECRET"
SECRETS = ["slackSECRETtoken", "T0SLACK1", "querySECRET", "userinfoSECRET", "discordSECRET", "123456"]


@pytest.fixture
def dora(acme: Any) -> User:
    return member("dora", acme, "admin")


def channels_saved(alice: User, api: Any) -> None:
    """Channels made and changed through the API, each URL a credential."""
    client = api(alice)
    made = []
    for name, url in (("slack", SLACK), ("token", TOKEN)):
        body = {"tenant": "acme", "name": name, "kind": "webhook", "url": url}
        answer = client.post("/api/v1/alert-channels", body, format="json")
        assert answer.status_code == 201, answer.json()
        made.append(answer.json()["id"])
    for url in (USERINFO, DISCORD):
        body = {"tenant": "acme", "name": "token", "kind": "webhook", "url": url}
        answer = client.put(f"/api/v1/alert-channels/{made[1]}", body, format="json")
        assert answer.status_code == 200, answer.json()


def test_the_audit_api_shows_where_a_url_points_never_its_credentials(
    acme: Any, alice: User, dora: User, api: Any
) -> None:
    channels_saved(alice, api)
    _, auditor = ApiKey.issue(scopes=["audit"], tenant=acme)
    read = api(auditor).get("/api/v1/audit?object_type=channel")
    assert read.status_code == 200
    text = json.dumps(read.json())
    assert not [secret for secret in SECRETS if secret in text]
    urls = [entry["changes"]["url"] for entry in read.json()["results"]]
    assert ["https://***@hooks.example.org/in", "https://discord.com/api/***/***/***"] in urls
    assert [None, "https://hooks.slack.com/services/***/***/***"] in urls
    assert [None, "https://hooks.example.org/alerts?token=***&team=***"] in urls


def test_the_csv_export_keeps_no_credentials_of_a_url(acme: Any, alice: User, dora: User, api: Any) -> None:
    channels_saved(alice, api)
    exported = signed_in(dora).get("/manage/audit/?format=csv&object_type=channel")
    text = exported.getvalue().decode()
    rows = list(csv.reader(io.StringIO(text)))[1:]
    assert len(rows) == 4 and "hooks.slack.com/services/***" in text
    assert not [secret for secret in SECRETS if secret in text]


def test_a_url_keeps_its_scheme_host_and_first_segment() -> None:
    assert redact_url("https://example.org") == "https://example.org"
    assert redact_url("https://example.org:8443/v1/chat/completions") == "https://example.org:8443/v1/***/***"
    assert redact_url("http://10.0.0.5/hook#frag") == "http://10.0.0.5/hook#***"
    assert redact_url("https://[::1]:80/a/b?x") == "https://[::1]:80/a/***?x"
    assert redact_url("not a url: https://example.org/a/b") == "not a url: https://example.org/a/b"
    assert redact_url("acme@example.org") == "acme@example.org"


class StatementsOnly:
    """What the migration asks of its schema editor (SQLite opens no schema editor in a
    test's transaction)."""

    connection = connection

    def execute(self, sql: str, params: Any = None) -> None:
        with connection.cursor() as cursor:
            cursor.execute(sql, params)


def test_the_migration_redacts_the_entries_already_logged_and_keeps_the_log_append_only(acme: Any) -> None:
    logged = AuditEntry.objects.create(
        tenant=acme,
        actor="alice",
        action="channel.update",
        object_type="channel",
        object_id="1",
        changes={"url": [SLACK, TOKEN], "name": ["a", "b"], "emails": [[], [USERINFO]]},
    )
    plain = AuditEntry.objects.create(tenant=acme, actor="alice", action="guardrail.update", changes={"x": [1, 2]})
    migration = importlib.import_module("kindgi_console.audit.migrations.0004_redact_urls")
    with transaction.atomic():
        migration.redact(apps, StatementsOnly())
    logged.refresh_from_db()
    assert logged.changes == {
        "url": ["https://hooks.slack.com/services/***/***/***", "https://hooks.example.org/alerts?token=***&team=***"],
        "name": ["a", "b"],
        "emails": [[], ["https://***@hooks.example.org/in"]],
    }
    assert AuditEntry.objects.get(pk=plain.pk).changes == {"x": [1, 2]}
    # the trigger is on again: no one else may edit an entry
    with pytest.raises((InternalError, ProgrammingError, IntegrityError), match="append-only"), transaction.atomic():
        AuditEntry.objects.filter(pk=logged.pk).update(actor="someone else")
