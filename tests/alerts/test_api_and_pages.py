"""`/api/v1/alert-rules`, `alert-channels`, `alert-firings` and the alerts pages: who may
read and write them, and what invalid input answers. charlie (globex) gets nothing of acme."""

from __future__ import annotations

from typing import Any

import pytest
from django.utils import timezone

from alerts.firing import fire
from alerts.models import AlertRule, Channel, Delivery
from alerts.rules import Observation
from alerts.services import save_channel, save_rule
from kindgi_console.tenancy.models import ApiKey
from tests.alerts.receiver import Receiver
from tests.conftest import signed_in

pytestmark = pytest.mark.django_db

RULE = {
    "tenant": "acme",
    "name": "critical spike",
    "kind": "violations",
    "params": {"severity": "critical", "factor": 10, "minCount": 5},
}


@pytest.fixture
def acme_rule(acme: Any, django_capture_on_commit_callbacks: Any) -> AlertRule:
    channel = save_channel(acme, {"name": "mail", "kind": "email", "emails": ["ops@example.org"]}, "fixture")
    rule = save_rule(acme, {"name": "acme rule", "kind": "run_failed", "params": {}, "channels": [channel]}, "fixture")
    with django_capture_on_commit_callbacks(execute=True):
        fire(rule, Observation(True, "run 1 failed", {"evaluation": 1}), timezone.now(), event_key="e:1")
    return rule


def test_an_author_creates_a_rule_and_a_channel_whose_secret_is_shown_once(alice: Any, api: Any) -> None:
    client = api(alice)
    created = client.post(
        "/api/v1/alert-channels",
        {"tenant": "acme", "name": "hook", "kind": "webhook", "url": "https://hooks.example.org/x"},
        format="json",
    )
    assert created.status_code == 201 and created.json()["secret"].startswith("whsec_")
    channel_id = created.json()["id"]
    assert "secret" not in client.get(f"/api/v1/alert-channels/{channel_id}").json()
    rule = client.post("/api/v1/alert-rules", {**RULE, "channels": [channel_id]}, format="json")
    assert rule.status_code == 201, rule.json()
    assert rule.json()["channels"] == [channel_id] and rule.json()["createdBy"] == "alice"
    assert [r["name"] for r in client.get("/api/v1/alert-rules").json()["results"]] == ["critical spike"]


def test_a_tenant_key_with_the_author_scope_writes_its_tenant(acme: Any, api: Any) -> None:
    _, secret = ApiKey.issue(scopes=["author", "read"], tenant=acme)
    answer = api(secret).post("/api/v1/alert-rules", {**RULE, "tenant": None}, format="json")
    assert answer.status_code == 201 and answer.json()["tenant"] == "acme"


@pytest.mark.parametrize(
    ("body", "path"),
    [
        ({**RULE, "params": {"severity": "fatal", "threshold": 1}}, "/params/severity"),
        ({**RULE, "params": {"windowDays": 2}}, "/params"),
        ({**RULE, "kind": "weather"}, "/kind"),
        ({**RULE, "name": ""}, "/name"),
        ({**RULE, "channels": [999]}, "/channels/0"),
        ({**RULE, "params": {"threshold": 1, "extra": 1}}, "/params"),
        ({**RULE, "kind": "spend", "params": {"period": "week", "amountUsd": 1}}, "/params/period"),
        ({**RULE, "kind": "spend", "params": {"period": "day"}}, "/params"),
        ({**RULE, "kind": "run_failed", "params": {"threshold": 1}}, "/params"),
    ],
)
def test_an_invalid_rule_is_a_400_naming_the_field(alice: Any, api: Any, body: Any, path: str) -> None:
    answer = api(alice).post("/api/v1/alert-rules", body, format="json")
    assert answer.status_code == 400
    assert path in [error["path"] for error in answer.json()["errors"]]
    assert not AlertRule.objects.exists()


@pytest.mark.parametrize(
    ("url", "body", "path"),
    [
        ("/api/v1/alert-rules", {**RULE, "name": "a\x00b"}, "/name"),
        ("/api/v1/alert-rules", {**RULE, "params": {"guardrail": "g\x00", "threshold": 1}}, "/params/guardrail"),
        ("/api/v1/alert-rules", {**RULE, "tenant": ["acme"]}, "/tenant"),
        ("/api/v1/alert-rules", {**RULE, "channels": [10**30]}, "/channels"),
        ("/api/v1/alert-channels", {"tenant": "acme", "name": "m", "kind": "email", "emails": [5]}, "/emails/0"),
        ("/api/v1/alert-channels", {"tenant": {"slug": "acme"}, "name": "m", "kind": "email"}, "/tenant"),
        ("/api/v1/alert-channels", [], ""),
    ],
)
def test_malformed_input_is_a_400_never_a_500(alice: Any, api: Any, url: str, body: Any, path: str) -> None:
    answer = api(alice).post(url, body, format="json")
    assert answer.status_code == 400, answer.content
    assert path in [error["path"] for error in answer.json()["errors"]]


def test_a_channel_url_must_be_http(alice: Any, api: Any) -> None:
    answer = api(alice).post(
        "/api/v1/alert-channels",
        {"tenant": "acme", "name": "x", "kind": "slack", "url": "file:///etc/passwd"},
        format="json",
    )
    assert answer.status_code == 400 and answer.json()["errors"][0]["path"] == "/url"


def test_a_reviewer_reads_but_does_not_write(bob: Any, acme_rule: Any, api: Any) -> None:
    client = api(bob)
    assert client.get(f"/api/v1/alert-rules/{acme_rule.pk}").status_code == 200
    assert client.post("/api/v1/alert-rules", RULE, format="json").status_code == 403
    assert client.delete(f"/api/v1/alert-rules/{acme_rule.pk}").status_code == 403  # no author role anywhere


def test_readers_see_only_the_origin_of_a_channel_url(acme: Any, alice: Any, bob: Any, api: Any) -> None:
    channel = save_channel(
        acme, {"name": "slack", "kind": "slack", "url": "https://hooks.slack.com/services/T0/B0/secret-token"}, "f"
    )
    assert api(alice).get(f"/api/v1/alert-channels/{channel.pk}").json()["url"].endswith("secret-token")
    for answer in (
        api(bob).get(f"/api/v1/alert-channels/{channel.pk}").json(),
        api(bob).get("/api/v1/alert-channels").json()["results"][0],
    ):
        assert answer["url"] == "https://hooks.slack.com/…"
    assert b"secret-token" not in signed_in(bob).get("/alerts/").content


def test_the_firing_shows_what_it_saw_and_each_delivery_attempt(alice: Any, acme_rule: Any, api: Any) -> None:
    (firing,) = api(alice).get("/api/v1/alert-firings").json()["results"]
    assert firing["observed"] == {"evaluation": 1} and firing["state"] == "resolved"
    (delivery,) = firing["deliveries"]
    assert delivery["state"] == "delivered" and delivery["log"][0]["ok"] is True


def test_charlie_gets_nothing_of_acmes_alerts_through_the_api(
    charlie: Any, charlie_key: Any, acme_rule: Any, api: Any
) -> None:
    channel = Channel.objects.get()
    firing_id = acme_rule.firings.get().pk
    for client in (api(charlie), api(charlie_key)):
        for url in ("/api/v1/alert-rules", "/api/v1/alert-channels", "/api/v1/alert-firings"):
            assert client.get(url).json()["results"] == []
        for url in (
            f"/api/v1/alert-rules/{acme_rule.pk}",
            f"/api/v1/alert-channels/{channel.pk}",
            f"/api/v1/alert-firings/{firing_id}",
        ):
            assert client.get(url).status_code == 404
    writer = api(charlie)
    assert writer.put(f"/api/v1/alert-rules/{acme_rule.pk}", RULE, format="json").status_code == 404
    assert writer.delete(f"/api/v1/alert-rules/{acme_rule.pk}").status_code == 404
    assert (
        writer.put(
            f"/api/v1/alert-channels/{channel.pk}",
            {"name": "x", "kind": "email", "emails": ["c@example.org"]},
            format="json",
        ).status_code
        == 404
    )
    assert writer.delete(f"/api/v1/alert-channels/{channel.pk}").status_code == 404
    assert writer.post("/api/v1/alert-rules", RULE, format="json").status_code == 403
    assert (
        writer.post(
            "/api/v1/alert-channels",
            {"tenant": "acme", "name": "x", "kind": "email", "emails": ["c@example.org"]},
            format="json",
        ).status_code
        == 403
    )
    assert (
        writer.post(
            "/api/v1/alert-rules", {**RULE, "tenant": "globex", "channels": [channel.pk]}, format="json"
        ).status_code
        == 400
    )  # acme's channel does not exist in globex
    assert AlertRule.objects.count() == 1 and Channel.objects.get().name == "mail"


def test_the_alerts_page_lists_rules_firings_and_the_delivery_log(alice: Any, acme_rule: Any) -> None:
    client = signed_in(alice)
    page = client.get("/alerts/").content.decode()
    assert "acme rule" in page and "run 1 failed" in page
    firing = acme_rule.firings.get()
    detail = client.get(f"/alerts/firings/{firing.pk}/").content.decode()
    assert Delivery.objects.get().msg_id in detail and "sent to 1 address" in detail


def test_an_author_adds_edits_and_deletes_a_rule_on_the_pages(alice: Any, acme: Any) -> None:
    client = signed_in(alice)
    client.post(
        "/alerts/", {"action": "add-channel", "name": "hook", "kind": "webhook", "url": "https://hooks.example.org/a"}
    )
    channel = Channel.objects.get()
    answer = client.post(
        "/alerts/",
        {
            "action": "add-rule",
            "name": "spend",
            "kind": "spend",
            "params": '{"amountUsd": 20}',
            "channels": [str(channel.pk)],
            "enabled": "on",
        },
    )
    assert answer.status_code == 302
    rule = AlertRule.objects.get()
    detail = client.get(f"/alerts/rules/{rule.pk}/")
    field = b'name="spend.amountUsd" type="number" step="any" inputmode="decimal" maxlength="200" value="20"'
    assert detail.status_code == 200 and field in detail.content
    bad = client.post(f"/alerts/rules/{rule.pk}/", {"name": "spend", "kind": "spend", "params": '{"amountUsd": -1}'})
    assert bad.status_code == 400 and "/params/amountUsd" in bad.content.decode()
    client.post(f"/alerts/rules/{rule.pk}/", {"name": "spend", "kind": "spend", "params": '{"amountUsd": 30}'})
    rule.refresh_from_db()
    assert rule.params == {"amountUsd": 30} and not rule.enabled
    client.post(f"/alerts/rules/{rule.pk}/", {"action": "delete"})
    assert not AlertRule.objects.exists()


def test_charlie_gets_404_for_acmes_alert_pages_and_writes(charlie: Any, acme_rule: Any) -> None:
    client = signed_in(charlie)
    firing = acme_rule.firings.get()
    assert "acme rule" not in client.get("/alerts/").content.decode()
    assert client.get(f"/alerts/rules/{acme_rule.pk}/").status_code == 404
    assert client.get(f"/alerts/firings/{firing.pk}/").status_code == 404
    assert client.post(f"/alerts/rules/{acme_rule.pk}/", {"action": "delete"}).status_code == 404
    assert client.post(f"/alerts/rules/{acme_rule.pk}/", {"name": "x", "kind": "run_failed"}).status_code == 404
    channel = Channel.objects.get()
    assert client.post("/alerts/", {"action": "delete-channel", "channel": channel.pk}).status_code == 404
    assert AlertRule.objects.filter(pk=acme_rule.pk).exists() and Channel.objects.filter(pk=channel.pk).exists()


def test_a_reviewer_cannot_write_on_the_pages(bob: Any, acme_rule: Any) -> None:
    client = signed_in(bob)
    assert client.post("/alerts/", {"action": "add-rule", "name": "x", "kind": "run_failed"}).status_code == 403
    assert client.post(f"/alerts/rules/{acme_rule.pk}/", {"action": "delete"}).status_code == 404


def test_a_name_taken_in_the_tenant_is_a_400_naming_it_and_replacing_keeps_its_own(
    alice: Any, charlie: Any, api: Any
) -> None:
    client = api(alice)
    first = client.post("/api/v1/alert-rules", RULE, format="json").json()
    again = client.post("/api/v1/alert-rules", RULE, format="json")
    assert again.status_code == 400 and again.json()["errors"][0]["path"] == "/name"
    assert client.put(f"/api/v1/alert-rules/{first['id']}", RULE, format="json").status_code == 200
    channel = {"tenant": "acme", "name": "mail", "kind": "email", "emails": ["ops@example.org"]}
    made = client.post("/api/v1/alert-channels", channel, format="json").json()
    twice = client.post("/api/v1/alert-channels", channel, format="json")
    assert twice.status_code == 400 and twice.json()["errors"][0]["path"] == "/name"
    assert client.put(f"/api/v1/alert-channels/{made['id']}", channel, format="json").status_code == 200
    other = api(charlie).post("/api/v1/alert-rules", {**RULE, "tenant": "globex"}, format="json")
    assert other.status_code == 201  # names are per tenant
    assert AlertRule.objects.count() == 2 and Channel.objects.count() == 1


def test_each_rule_kind_has_its_fields_and_a_refused_save_keeps_the_ticks(alice: Any, acme: Any) -> None:
    client = signed_in(alice)
    mail = save_channel(acme, {"name": "mail", "kind": "email", "emails": ["ops@example.org"]}, "fixture")
    hook = save_channel(acme, {"name": "hook", "kind": "webhook", "url": "https://hooks.example.org/a"}, "fixture")
    page = client.get("/alerts/").content.decode()
    fields = ("violations.threshold", "violations.windowDays", "spend.amountUsd", "spend.period", "precision.threshold")
    for field in fields:
        assert f'name="{field}"' in page, field
    assert 'name="params"' not in page  # no raw JSON box
    refused = client.post(
        "/alerts/",
        {
            "action": "add-rule",
            "name": "spend",
            "kind": "spend",
            "spend.amountUsd": "-1",
            "spend.period": "month",
            "channels": [str(hook.pk)],
            "enabled": "on",
        },
    )
    body = refused.content.decode()
    assert refused.status_code == 400 and "/params/amountUsd" in body
    assert f'value="{hook.pk}" checked' in body and f'value="{mail.pk}" checked' not in body
    assert 'name="spend.amountUsd" type="number" step="any" inputmode="decimal" maxlength="200" value="-1"' in body
    assert '<option value="month" selected>' in body and '<option value="spend" selected>' in body
    created = client.post(
        "/alerts/",
        {
            "action": "add-rule",
            "name": "spend",
            "kind": "spend",
            "spend.amountUsd": "20.5",
            "spend.period": "month",
            "violations.threshold": "7",  # another kind's field: not this rule's
            "channels": [str(hook.pk)],
            "enabled": "on",
        },
    )
    assert created.status_code == 302
    rule = AlertRule.objects.get()
    assert rule.params == {"amountUsd": 20.5, "period": "month"}
    # The rule page: the same fields hold its values; a refused edit keeps the new ticks.
    edit = client.post(
        f"/alerts/rules/{rule.pk}/",
        {"name": "spend", "kind": "violations", "violations.windowDays": "x", "channels": [str(mail.pk)]},
    )
    body = edit.content.decode()
    assert edit.status_code == 400 and "/params/windowDays" in body
    assert f'value="{mail.pk}" checked' in body and f'value="{hook.pk}" checked' not in body
    saved = client.post(
        f"/alerts/rules/{rule.pk}/",
        {"name": "spend", "kind": "violations", "violations.threshold": "5", "violations.windowDays": "2"},
    )
    assert saved.status_code == 302
    rule.refresh_from_db()
    assert (rule.kind, rule.params) == ("violations", {"threshold": 5, "windowDays": 2})


def test_send_a_test_reaches_the_channels_receiver_signed_and_says_what_it_answered(alice: Any, acme: Any) -> None:
    client = signed_in(alice)
    with Receiver(statuses=[204, 500]) as receiver:
        hook = save_channel(acme, {"name": "hook", "kind": "webhook", "url": receiver.url}, "fixture")
        receiver.secret = hook.secret
        answer = client.post(f"/alerts/channels/{hook.pk}/test/", follow=True)
        assert answer.status_code == 200
        assert "Test sent to hook: HTTP 204" in answer.content.decode()
        (received,) = receiver.requests
        assert received.verified and received.json["type"] == "alert.test"
        assert received.json["data"]["tenant"] == "acme" and received.json["data"]["sentBy"] == "alice"
        failed = client.post(f"/alerts/channels/{hook.pk}/test/", follow=True).content.decode()
        assert "The test to hook failed: HTTP 500" in failed
        assert len(receiver.requests) == 2
    assert not Delivery.objects.exists()  # a test is not an alert: no delivery, no firing
    page = client.get("/alerts/").content.decode()
    assert f'action="/alerts/channels/{hook.pk}/test/"' in page and "Send a test" in page


def test_a_test_to_an_email_channel_goes_through_the_mail_backend(alice: Any, acme: Any, mailoutbox: Any) -> None:
    mail = save_channel(acme, {"name": "mail", "kind": "email", "emails": ["ops@example.org"]}, "fixture")
    answer = signed_in(alice).post(f"/alerts/channels/{mail.pk}/test/", follow=True).content.decode()
    assert "Test sent to mail: sent to 1 address(es)" in answer
    assert [m.to for m in mailoutbox] == [["ops@example.org"]] and "Test message" in mailoutbox[0].subject


def test_another_tenants_user_and_a_reviewer_cannot_send_a_test_on_acmes_channel(
    charlie: Any, bob: Any, acme: Any
) -> None:
    with Receiver() as receiver:
        hook = save_channel(acme, {"name": "hook", "kind": "webhook", "url": receiver.url}, "fixture")
        assert signed_in(charlie).post(f"/alerts/channels/{hook.pk}/test/").status_code == 404
        assert signed_in(bob).post(f"/alerts/channels/{hook.pk}/test/").status_code == 404
        assert signed_in(charlie).get(f"/alerts/channels/{hook.pk}/test/").status_code in (404, 405)
        assert receiver.requests == []
    assert "Send a test" not in signed_in(bob).get("/alerts/").content.decode()
