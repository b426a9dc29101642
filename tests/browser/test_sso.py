"""Single sign-on end to end: Chromium, the console's live server, and a real OpenID provider.

The provider is django-oauth-toolkit in a process of its own (tests/oidc_provider), with an
RSA key made for the run; its people and groups are set by its `provider_fixture` command.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client
from playwright.sync_api import Page, expect

from kindgi_console.audit.models import AuditEntry
from kindgi_console.tenancy import changes
from kindgi_console.tenancy.models import Membership, SSOIdentity, Tenant
from kindgi_console.tenancy.sso_groups import parse_groups
from tests.browser.conftest import screenshot
from tests.oidc_provider.server import Provider

CLIENT_ID = "kindgi-console"
CLIENT_SECRET = "console-secret-for-the-test"
PROVIDER_NAME = "Test IdP"
MAPPING = "eng=acme:author,ops=acme:admin,beta-readers=beta:reviewer"


@pytest.fixture(scope="module")
def provider(live_server: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Provider]:
    with Provider(tmp_path_factory.mktemp("oidc-provider")).running() as running:
        running.fixture(
            client={"id": CLIENT_ID, "secret": CLIENT_SECRET, "redirect_uri": f"{live_server.url}/oidc/callback/"}
        )
        yield running


@pytest.fixture
def sso(settings: Any, provider: Provider) -> Provider:
    """The console configured for the provider, as the KINDGI_OIDC_* variables would."""
    settings.KINDGI_OIDC_ISSUER = provider.issuer
    settings.KINDGI_OIDC_CLIENT_ID = settings.OIDC_RP_CLIENT_ID = CLIENT_ID
    settings.OIDC_RP_CLIENT_SECRET = CLIENT_SECRET
    settings.OIDC_RP_SCOPES = "openid email profile groups"
    settings.KINDGI_OIDC_PROVIDER_NAME = PROVIDER_NAME
    settings.KINDGI_OIDC_GROUPS = parse_groups(MAPPING)
    settings.AUTHENTICATION_BACKENDS = [
        "kindgi_console.tenancy.sso.SSOBackend",
        "django.contrib.auth.backends.ModelBackend",
    ]
    provider.tamper("")
    return provider


@pytest.fixture
def tenants(db: Any) -> dict[str, Tenant]:
    return {slug: Tenant.objects.create(slug=slug, name=f"{slug.title()} Corp") for slug in ("acme", "beta", "gamma")}


def person(provider: Provider, username: str, groups: list[str]) -> None:
    provider.fixture(
        users=[
            {"username": username, "password": f"pw-{username}", "email": f"{username}@example.com", "groups": groups}
        ]
    )


def through_provider(page: Page, provider: Provider, username: str) -> None:
    """From the console's sign-in page to the provider's, signed in there, and back."""
    page.goto("/login/")
    page.get_by_role("link", name=f"Sign in with {PROVIDER_NAME}").click()
    page.wait_for_url(f"{provider.url}/accounts/login/**")
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill(f"pw-{username}")
    page.get_by_role("button", name="Log in").click()


def signed_in(page: Page) -> None:
    page.wait_for_url(lambda url: "/login/" not in url and "/oidc/" not in url and "127.0.0.1" not in url)


def sign_out(page: Page) -> None:
    page.context.clear_cookies()  # the console's session and the provider's


def refused(page: Page, text: str) -> None:
    expect(page.get_by_role("heading", name="Sign-in refused")).to_be_visible()
    expect(page.get_by_role("alert")).to_contain_text(text)


@pytest.mark.django_db(transaction=True)
def test_a_mapped_person_lands_in_their_tenant_with_their_role(page, sso, tenants):
    person(sso, "alice", ["eng"])
    page.goto("/login/")
    expect(page.get_by_role("link", name=f"Sign in with {PROVIDER_NAME}")).to_be_visible()
    expect(page.get_by_label("Password")).to_be_visible()  # passwords still sign in
    screenshot(page, "sign-in-sso")
    through_provider(page, sso, "alice")
    signed_in(page)
    expect(page.locator("body")).to_contain_text("Acme Corp")
    alice = User.objects.get(username="alice")
    assert alice.email == "alice@example.com" and not alice.has_usable_password()
    assert SSOIdentity.objects.get(user=alice).issuer == sso.issuer
    assert [(m.tenant.slug, m.role, m.sso) for m in Membership.objects.filter(user=alice)] == [("acme", "author", True)]
    actions = list(AuditEntry.objects.filter(actor__in=["sso", "alice"]).values_list("action", flat=True))
    assert actions == ["user.create", "member.add", "user.signin"]
    # Another tenant's pages give her nothing: she is no member of beta.
    page.goto("/")
    expect(page.locator("body")).not_to_contain_text("Beta Corp")
    assert page.script_errors == []


@pytest.mark.django_db(transaction=True)
def test_a_person_whose_groups_grant_nothing_is_refused_and_no_account_is_made(page, sso, tenants):
    person(sso, "bob", ["marketing"])
    through_provider(page, sso, "bob")
    refused(page, "give you no tenant")
    screenshot(page, "sign-in-sso-refused")
    assert not User.objects.filter(username="bob").exists()
    assert not SSOIdentity.objects.exists()
    entry = AuditEntry.objects.get(action="user.signin-refused")
    assert entry.changes["reason"] == [None, "no-grant"]
    page.goto("/")
    page.wait_for_url("**/login/**")


@pytest.mark.django_db(transaction=True)
def test_a_group_removed_at_the_provider_removes_its_membership_at_the_next_sign_in(page, sso, tenants):
    person(sso, "carol", ["eng", "beta-readers"])
    through_provider(page, sso, "carol")
    signed_in(page)
    carol = User.objects.get(username="carol")
    changes.add_member(carol, tenants["gamma"], "reviewer")  # granted by hand by a tenant admin
    sign_out(page)

    person(sso, "carol", ["ops"])  # out of eng and beta-readers, into ops
    through_provider(page, sso, "carol")
    signed_in(page)
    memberships = {(m.tenant.slug, m.role, m.sso) for m in Membership.objects.filter(user=carol)}
    assert memberships == {("acme", "admin", True), ("gamma", "reviewer", False)}
    assert AuditEntry.objects.filter(action="member.remove", object_id="carol", tenant=tenants["beta"]).exists()
    sign_out(page)

    person(sso, "carol", [])  # no group left: the hand-made membership still lets her in
    through_provider(page, sso, "carol")
    signed_in(page)
    assert {(m.tenant.slug, m.sso) for m in Membership.objects.filter(user=carol)} == {("gamma", False)}


@pytest.mark.django_db(transaction=True)
def test_a_person_whose_last_group_is_removed_is_refused(page, sso, tenants):
    person(sso, "dave", ["eng"])
    through_provider(page, sso, "dave")
    signed_in(page)
    sign_out(page)
    person(sso, "dave", [])
    through_provider(page, sso, "dave")
    refused(page, "give you no tenant")
    assert not Membership.objects.filter(user__username="dave").exists()


@pytest.mark.parametrize("mode", ["signature", "audience", "nonce"])
@pytest.mark.django_db(transaction=True)
def test_a_tampered_id_token_is_refused(page, sso, tenants, mode):
    person(sso, "erin", ["eng"])
    sso.tamper(mode)
    through_provider(page, sso, "erin")
    refused(page, "could not be verified")
    assert not User.objects.filter(username="erin").exists()
    assert AuditEntry.objects.get(action="user.signin-refused").changes["reason"] == [None, "unverified"]
    page.goto("/")
    page.wait_for_url("**/login/**")


@pytest.mark.django_db(transaction=True)
def test_a_callback_with_another_state_or_replayed_is_refused(page, sso, tenants):
    person(sso, "fay", ["eng"])
    callbacks: list[str] = []
    page.on("request", lambda request: callbacks.append(request.url) if "/oidc/callback/" in request.url else None)
    through_provider(page, sso, "fay")
    signed_in(page)
    (callback,) = callbacks
    assert "state=" in callback
    sign_out(page)

    # A new sign-in is under way (its state is in the session), and a callback comes with another state.
    page.goto("/login/")
    page.get_by_role("link", name=f"Sign in with {PROVIDER_NAME}").click()
    page.wait_for_url(f"{sso.url}/accounts/login/**")
    page.goto(callback.replace("state=", "state=x"))
    refused(page, "could not be verified")
    page.goto(callback)  # the first sign-in's code and state again
    expect(page.get_by_role("heading", name="Sign-in refused")).to_be_visible()
    page.goto("/")
    page.wait_for_url("**/login/**")
    assert AuditEntry.objects.filter(action="user.signin").count() == 1


@pytest.mark.django_db(transaction=True)
def test_password_sign_in_turned_off_refuses_the_form_even_posted(page, sso, settings, tenants):
    settings.KINDGI_PASSWORD_SIGNIN = False
    settings.AUTHENTICATION_BACKENDS = ["kindgi_console.tenancy.sso.SSOBackend"]
    User.objects.create_user("gina", password="pw-gina-123")
    changes.add_member(User.objects.get(username="gina"), tenants["acme"], "admin")

    page.goto("/login/")
    expect(page.get_by_role("link", name=f"Sign in with {PROVIDER_NAME}")).to_be_visible()
    expect(page.get_by_label("Password")).to_have_count(0)
    screenshot(page, "sign-in-sso-only")

    client = Client()
    answer = client.post("/login/", {"username": "gina", "password": "pw-gina-123"})
    assert answer.status_code == 403
    assert b"Password sign-in is turned off" in answer.content
    assert client.get("/").status_code == 302  # not signed in
    assert client.post("/admin/login/", {"username": "gina", "password": "pw-gina-123"}).status_code == 302
    assert "_auth_user_id" not in client.session
    assert not AuditEntry.objects.filter(action="user.signin").exists()

    person(sso, "hank", ["eng"])
    through_provider(page, sso, "hank")
    signed_in(page)  # single sign-on still does
