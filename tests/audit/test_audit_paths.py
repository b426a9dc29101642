"""Every path that changes guardrails (shadow and promote included), reviews and claims, members
and roles, API keys, judge models and policies, alert rules and tenants writes exactly one
audit entry per change, with who, the tenant, the object and the diff.

The test runs with real transactions (transactional_db), so that `audit.record`'s check
that it runs inside the change's transaction is exercised on every path.
"""

from __future__ import annotations

import io
import json
from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command

from kindgi_console.audit.models import AuditEntry
from kindgi_console.tenancy.models import ApiKey, Membership
from tests.conftest import make_guardrail, member, signed_in
from tests.traces import seed
from tests.traces.test_judge_ledger import judge_document

pytestmark = pytest.mark.django_db(transaction=True)


class Log:
    """The entries each step adds."""

    def __init__(self) -> None:
        self.last = AuditEntry.objects.order_by("-pk").values_list("pk", flat=True).first() or 0

    def step(self, do: Callable[[], Any], *actions: str) -> list[AuditEntry]:
        result = do()
        if hasattr(result, "status_code"):
            assert result.status_code < 400, getattr(result, "content", b"")[:500]
        entries = list(AuditEntry.objects.filter(pk__gt=self.last).order_by("pk"))
        assert [entry.action for entry in entries] == list(actions)
        self.last = entries[-1].pk if entries else self.last
        return entries


def test_every_path_writes_one_entry_per_change(acme: Any, globex: Any, alice: Any, bob: Any, api: Any) -> None:
    root = User.objects.create_superuser("root", "root@example.org", "correct horse 42")
    dora = member("dora", acme, "admin")
    log = Log()
    author_key = ApiKey.issue(scopes=["author", "read"], name="publisher")[1]

    # guardrails: create, edit (API, user and key), toggle, import, delete (pages and API)
    (created,) = log.step(
        lambda: api(alice).post("/api/v1/guardrails", make_guardrail(), format="json"), "guardrail.create"
    )
    assert created.actor == "alice" and created.object_repr == "no-refunds"
    assert created.changes["check"] == [None, "never-call-tool"] and created.changes["enabled"] == [None, True]
    (edited,) = log.step(
        lambda: api(author_key).put("/api/v1/guardrails/no-refunds", make_guardrail(severity="warn"), format="json"),
        "guardrail.update",
    )
    assert edited.actor.startswith("key:kgi_") and edited.changes == {"severity": ["critical", "warn"]}
    (toggled,) = log.step(
        lambda: signed_in(alice).post("/guardrails/no-refunds/toggle/", {"enabled": "false"}), "guardrail.toggle"
    )
    assert toggled.changes == {"enabled": [True, False]}
    log.step(lambda: signed_in(alice).post("/guardrails/no-refunds/toggle/", {"enabled": "false"}))  # no change
    upload = SimpleUploadedFile(
        "g.json",
        json.dumps(
            make_guardrail("cite", check="must-cite", config={"min": 1}, action={"on-violation": "log-only"})
        ).encode(),
    )
    log.step(lambda: signed_in(alice).post("/guardrails/import/", {"files": [upload]}), "guardrail.import")
    log.step(lambda: signed_in(alice).post("/guardrails/cite/delete/"), "guardrail.delete")
    log.step(
        lambda: api(alice).put("/api/v1/guardrails/no-refunds", make_guardrail(), format="json"), "guardrail.update"
    )
    (restored,) = log.step(
        lambda: signed_in(alice).post("/guardrails/no-refunds/revisions/2/restore/"), "guardrail.update"
    )
    assert restored.changes == {"severity": ["critical", "warn"]}

    # reviews: one violation, then a bulk review of two
    signed_in(alice).post("/guardrails/no-refunds/toggle/", {"enabled": "true"})
    log.last = AuditEntry.objects.order_by("-pk").first().pk
    seed.traces(acme, 3)
    first, *others = seed.violations(acme)
    (reviewed,) = log.step(
        lambda: api(bob).post(
            f"/api/v1/violations/{first.pk}/review", {"state": "acknowledged", "note": "looking"}, format="json"
        ),
        "violation.review",
    )
    assert (reviewed.actor, reviewed.tenant, reviewed.object_id) == ("bob", acme, str(first.pk))
    assert reviewed.changes == {"state": ["open", "acknowledged"], "note": [None, "looking"]}
    log.step(
        lambda: api(bob).post(
            "/api/v1/violations/review", {"ids": [v.pk for v in others], "state": "acknowledged"}, format="json"
        ),
        "violation.review",
        "violation.review",
    )
    (on_page,) = log.step(
        lambda: signed_in(bob).post(f"/violations/{first.pk}/review/", {"state": "false-positive", "note": ""}),
        "violation.review",
    )
    assert on_page.actor == "bob" and on_page.changes["state"] == ["acknowledged", "false-positive"]

    # claims: over the API and on the page, released by the holder and by an admin
    other = others[0]
    (claimed,) = log.step(lambda: api(bob).post(f"/api/v1/violations/{other.pk}/claim"), "violation.claim")
    assert (claimed.actor, claimed.tenant, claimed.changes) == ("bob", acme, {"assignee": [None, "bob"]})
    log.step(lambda: api(bob).post(f"/api/v1/violations/{other.pk}/claim"))  # its own again: no change
    log.step(lambda: api(bob).post(f"/api/v1/violations/{other.pk}/unclaim"), "violation.unclaim")
    log.step(lambda: signed_in(bob).post(f"/violations/{other.pk}/claim/", {"action": "claim"}), "violation.claim")
    (released,) = log.step(
        lambda: signed_in(dora).post(f"/violations/{other.pk}/claim/", {"action": "unclaim"}), "violation.unclaim"
    )
    assert (released.actor, released.changes) == ("dora", {"assignee": ["bob", None]})

    # members and roles (acme's admin dora), tenants (a superuser, and the command)
    carol = User.objects.create_user("carol", "carol@example.org", "correct horse 42")
    admin = signed_in(dora)
    (added,) = log.step(
        lambda: admin.post(
            "/manage/members/", {"tenant": "acme", "action": "add", "username": "carol", "role": "reviewer"}
        ),
        "member.add",
    )
    assert (added.actor, added.tenant, added.object_id, added.changes) == (
        "dora",
        acme,
        "carol",
        {"role": [None, "reviewer"]},
    )
    membership = Membership.objects.get(user=carol)
    log.step(
        lambda: admin.post(
            "/manage/members/", {"tenant": "acme", "action": "role", "membership": membership.pk, "role": "author"}
        ),
        "member.role",
    )
    log.step(
        lambda: admin.post("/manage/members/", {"tenant": "acme", "action": "remove", "membership": membership.pk}),
        "member.remove",
    )
    log.step(
        lambda: signed_in(root).post("/manage/tenants/", {"slug": "initech", "name": "Initech"}),
        "tenant.create",
        "member.add",
    )
    log.step(lambda: call_command("create_tenant", "hooli", stdout=io.StringIO()), "tenant.create")

    # API keys: the page (create, revoke) and the command
    (key_made,) = log.step(
        lambda: admin.post(
            "/manage/api-keys/", {"action": "create", "tenant": "acme", "name": "bot", "scopes": ["read"]}
        ),
        "apikey.create",
    )
    key = ApiKey.objects.get(name="bot")
    assert key_made.object_id == key.prefix and key_made.changes["scopes"] == [None, ["read"]]
    log.step(lambda: admin.post("/manage/api-keys/", {"action": "revoke", "key": key.pk}), "apikey.revoke")
    (by_command,) = log.step(
        lambda: call_command("create_api_key", "--tenant", "acme", "--scopes", "read", stdout=io.StringIO()),
        "apikey.create",
    )
    assert by_command.actor == "command:create_api_key"

    # judge models (API and page) and a tenant's judge policy
    registration = {
        "id": "mini",
        "provider": "openai",
        "model": "gpt-4.1-mini",
        "baseUrl": "https://api.openai.com/v1/",
        "apiKeyEnv": "OPENAI_API_KEY",
        "pricing": {"inputUsdPerMTok": 0.4, "outputUsdPerMTok": "1.60"},
        "capabilities": ["json"],
    }
    sudo = api(root)
    (registered,) = log.step(
        lambda: sudo.post("/api/v1/judge-models", registration, format="json"), "judgemodel.create"
    )
    assert registered.tenant is None and registered.actor == "root"
    log.step(
        lambda: sudo.put(
            "/api/v1/judge-models/mini", {**registration, "capabilities": ["json", "vision"]}, format="json"
        ),
        "judgemodel.update",
    )
    log.step(lambda: sudo.delete("/api/v1/judge-models/mini"), "judgemodel.delete")
    sudo.post("/api/v1/judge-models", registration, format="json")
    log.last = AuditEntry.objects.order_by("-pk").first().pk
    log.step(lambda: signed_in(root).post("/judge-models/mini/delete/"), "judgemodel.delete")
    (policy,) = log.step(
        lambda: api(dora).put("/api/v1/tenants/acme/judge-policy", {"allowedModels": []}, format="json"),
        "judgepolicy.update",
    )
    assert policy.tenant == acme and policy.changes == {"allowedModels": [None, []]}

    # shadow and promote, through the API (a user, then a key) and the page
    log.step(lambda: api(alice).post("/api/v1/guardrails", judge_document(), format="json"), "guardrail.create")
    url = "/api/v1/guardrails/no-refund-promises/shadow"
    (shadowed,) = log.step(lambda: api(alice).post(url, {"shadow": True}, format="json"), "guardrail.shadow")
    assert (shadowed.actor, shadowed.tenant, shadowed.object_repr) == ("alice", acme, "no-refund-promises")
    assert shadowed.changes == {"shadow": [False, True]}
    page = "/guardrails/no-refund-promises/shadow/"
    (sampled,) = log.step(
        lambda: signed_in(alice).post(page, {"shadow": "true", "sample_percent": "25"}), "guardrail.shadow"
    )
    assert (sampled.actor, sampled.changes) == ("alice", {"sampleRate": [None, 0.25]})
    (promoted,) = log.step(lambda: signed_in(alice).post(page, {"shadow": "false"}), "guardrail.promote")
    assert promoted.changes == {"shadow": [True, False], "sampleRate": [0.25, None]}
    (by_key,) = log.step(
        lambda: api(author_key).post(url, {"shadow": True, "sampleRate": 0.5}, format="json"), "guardrail.shadow"
    )
    assert by_key.actor.startswith("key:kgi_") and by_key.tenant == acme
    log.step(lambda: api(author_key).post(url, {"shadow": False}, format="json"), "guardrail.promote")
    log.step(lambda: api(author_key).post(url, {"shadow": False}, format="json"))  # no change, no entry
    log.step(lambda: signed_in(alice).post(page, {"shadow": "false"}))

    # alert rules and channels
    (channel_made,) = log.step(
        lambda: api(alice).post(
            "/api/v1/alert-channels",
            {"tenant": "acme", "name": "hook", "kind": "webhook", "url": "https://hooks.example.org/x"},
            format="json",
        ),
        "channel.create",
    )
    assert channel_made.changes["secret"] == [None, "(secret)"]
    channel_id = int(channel_made.object_id)
    rule = {"tenant": "acme", "name": "r", "kind": "run_failed", "params": {}, "channels": [channel_id]}
    (rule_made,) = log.step(lambda: api(alice).post("/api/v1/alert-rules", rule, format="json"), "alertrule.create")
    log.step(
        lambda: api(alice).put(f"/api/v1/alert-rules/{rule_made.object_id}", {**rule, "enabled": False}, format="json"),
        "alertrule.update",
    )
    log.step(lambda: api(alice).delete(f"/api/v1/alert-rules/{rule_made.object_id}"), "alertrule.delete")
    log.step(lambda: api(alice).delete(f"/api/v1/alert-channels/{channel_id}"), "channel.delete")
