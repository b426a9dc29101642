"""The admin pages: tenants, members and API keys, for a tenant's admins only."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from kindgi_console.audit.models import AuditEntry
from kindgi_console.tenancy.models import ApiKey, Membership, Tenant, hash_key
from tests.conftest import member

PAGES = ["/manage/tenants/", "/manage/members/", "/manage/api-keys/"]


@pytest.fixture
def ada(acme: Tenant) -> Any:
    """Ada administers acme."""
    return member("ada", acme, "admin")


@pytest.fixture
def gus(globex: Tenant) -> Any:
    """Gus administers globex, and nothing of acme."""
    return member("gus", globex, "admin")


def signed_in(client: Any, user: Any) -> Any:
    client.force_login(user)
    return client


@pytest.mark.parametrize("url", PAGES)
def test_an_admin_opens_every_admin_page(client: Any, ada: Any, url: str) -> None:
    assert signed_in(client, ada).get(url).status_code == 200


@pytest.mark.parametrize("url", PAGES)
def test_authors_and_reviewers_get_nothing(client: Any, alice: Any, bob: Any, url: str) -> None:
    assert signed_in(client, alice).get(url).status_code == 404
    assert signed_in(client, bob).get(url).status_code == 404


def test_the_admin_section_shows_in_the_navigation_for_admins_only(client: Any, ada: Any, bob: Any) -> None:
    assert b'href="/manage/members/"' in signed_in(client, ada).get("/").content
    assert b'href="/manage/members/"' not in signed_in(client, bob).get("/").content


# ------------------------------------------------------------------ tenants


def test_an_admin_lists_only_the_tenants_they_administer(client: Any, ada: Any, gus: Any) -> None:
    tenants = list(signed_in(client, ada).get("/manage/tenants/").context["tenants"])
    assert [t.slug for t in tenants] == ["acme"]
    assert tenants[0].member_count == 1


def test_a_superuser_creates_a_tenant_and_becomes_its_admin(client: Any, django_user_model: Any) -> None:
    root = django_user_model.objects.create_superuser("root", "root@example.org", "pw-root-123")
    response = signed_in(client, root).post("/manage/tenants/", {"name": "Initech", "slug": ""})
    assert response.status_code == 302
    tenant = Tenant.objects.get(slug="initech")
    assert Membership.objects.get(tenant=tenant, user=root).role == "admin"
    again = client.post("/manage/tenants/", {"name": "Initech", "slug": "initech"})
    assert again.status_code == 400 and b"already exists" in again.content


def test_a_tenant_admin_may_not_create_tenants(client: Any, ada: Any) -> None:
    assert signed_in(client, ada).post("/manage/tenants/", {"slug": "mine"}).status_code == 403
    assert not Tenant.objects.filter(slug="mine").exists()


# ------------------------------------------------------------------ members


def test_an_admin_adds_changes_and_removes_a_member(client: Any, ada: Any, django_user_model: Any) -> None:
    erin = django_user_model.objects.create_user("erin", password="pw-erin-123")
    signed_in(client, ada)
    response = client.post(
        "/manage/members/", {"tenant": "acme", "action": "add", "username": "erin", "role": "reviewer"}
    )
    assert response.status_code == 302
    membership = Membership.objects.get(user=erin)
    assert membership.role == "reviewer"
    client.post("/manage/members/", {"tenant": "acme", "action": "role", "membership": membership.pk, "role": "author"})
    assert Membership.objects.get(user=erin).role == "author"
    client.post("/manage/members/", {"tenant": "acme", "action": "remove", "membership": membership.pk})
    assert not Membership.objects.filter(user=erin).exists()


def test_adding_an_unknown_user_names_the_field(client: Any, ada: Any) -> None:
    response = signed_in(client, ada).post(
        "/manage/members/", {"tenant": "acme", "action": "add", "username": "nobody", "role": "author"}
    )
    assert response.status_code == 400
    assert response.context["form"]["errors"]["username"].startswith("There is no user 'nobody'")


def test_the_last_admin_stays(client: Any, ada: Any) -> None:
    membership = Membership.objects.get(user=ada)
    signed_in(client, ada)
    client.post("/manage/members/", {"tenant": "acme", "action": "remove", "membership": membership.pk})
    client.post(
        "/manage/members/", {"tenant": "acme", "action": "role", "membership": membership.pk, "role": "reviewer"}
    )
    assert Membership.objects.get(pk=membership.pk).role == "admin"


def test_another_tenants_admin_sees_and_changes_nothing_of_acme(client: Any, ada: Any, gus: Any, bob: Any) -> None:
    signed_in(client, gus)
    assert client.get("/manage/members/?tenant=acme").status_code == 404
    page = client.get("/manage/members/")
    assert page.context["tenant"].slug == "globex" and b"bob" not in page.content
    bob_membership = Membership.objects.get(user=bob)
    for data in [
        {"tenant": "acme", "action": "remove", "membership": bob_membership.pk},
        {"tenant": "globex", "action": "remove", "membership": bob_membership.pk},
        {"tenant": "acme", "action": "add", "username": "gus", "role": "admin"},
    ]:
        assert client.post("/manage/members/", data).status_code == 404
    assert Membership.objects.filter(user=bob).exists()
    assert not Membership.objects.filter(user=gus, tenant__slug="acme").exists()


@pytest.fixture
def erin_with_keys(ada: Any, acme: Tenant, globex: Tenant) -> tuple[Membership, str, str, str]:
    """Erin administers acme and globex, and made a key for each; ada made one for acme."""
    erin = member("erin", acme, "admin")
    Membership.objects.create(user=erin, tenant=globex, role="admin")
    _, acme_secret = ApiKey.issue(scopes=["read"], tenant=acme, created_by=erin)
    _, globex_secret = ApiKey.issue(scopes=["read"], tenant=globex, created_by=erin)
    _, adas_secret = ApiKey.issue(scopes=["read"], tenant=acme, created_by=ada)
    return Membership.objects.get(user=erin, tenant=acme), acme_secret, globex_secret, adas_secret


def works(secret: str) -> bool:
    from rest_framework.test import APIClient

    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {secret}")
    return bool(client.get("/api/v1/traces").status_code == 200)


def test_removing_a_member_says_that_the_keys_they_made_still_work(client: Any, ada: Any, erin_with_keys: Any) -> None:
    membership, acme_secret, _, _ = erin_with_keys
    signed_in(client, ada)
    page = client.get("/manage/members/?tenant=acme").content.decode()
    assert "made 1 active API key" in page and 'name="revoke_keys"' in page
    data = {"tenant": "acme", "action": "remove", "membership": membership.pk}
    answer = client.post("/manage/members/", data, follow=True).content.decode()
    assert not Membership.objects.filter(pk=membership.pk).exists()
    assert "the 1 API key(s) they made for acme still work" in answer
    assert works(acme_secret)
    keys = client.get("/manage/api-keys/").content.decode()
    assert keys.count("(no longer a member: the key still works)") == 1


def test_removing_a_member_with_their_keys_revokes_the_keys_they_made_for_the_tenant(
    client: Any, ada: Any, erin_with_keys: Any
) -> None:
    from kindgi_console.audit.models import AuditEntry

    membership, acme_secret, globex_secret, adas_secret = erin_with_keys
    signed_in(client, ada)
    data = {"tenant": "acme", "action": "remove", "membership": membership.pk, "revoke_keys": "on"}
    answer = client.post("/manage/members/", data, follow=True).content.decode()
    assert "the 1 API key(s) they made are revoked" in answer
    assert not works(acme_secret)
    assert works(globex_secret) and works(adas_secret)  # another tenant's, another person's
    assert list(
        AuditEntry.objects.filter(action__in=["apikey.revoke", "member.remove"])
        .order_by("pk")
        .values_list("action", flat=True)
    ) == ["apikey.revoke", "member.remove"]  # in the order they were written (one transaction, one instant)


def test_another_tenants_admin_can_neither_remove_nor_revoke(client: Any, gus: Any, erin_with_keys: Any) -> None:
    membership, acme_secret, _, _ = erin_with_keys
    signed_in(client, gus)
    for tenant in ("acme", "globex"):
        data = {"tenant": tenant, "action": "remove", "membership": membership.pk, "revoke_keys": "on"}
        assert client.post("/manage/members/", data).status_code == 404
    assert Membership.objects.filter(pk=membership.pk).exists() and works(acme_secret)


def test_the_member_list_takes_a_fixed_number_of_queries(client: Any, ada: Any, django_user_model: Any) -> None:
    counts = []
    for size in (2, 20):
        for n in range(size):
            user = django_user_model.objects.create_user(f"m{size}-{n}")
            Membership.objects.create(user=user, tenant=ada.memberships.get().tenant, role="reviewer")
        signed_in(client, ada)
        with CaptureQueriesContext(connection) as queries:
            assert client.get("/manage/members/").status_code == 200
        counts.append(len(queries))
    assert counts[0] == counts[1]


# ------------------------------------------------------------------ API keys


def new_key(client: Any, **fields: Any) -> Any:
    """Create a key as the page does: its form, with the one-time token the page gave."""
    token = client.get("/manage/api-keys/").context.get("form_token", "")
    data = {"action": "create", "tenant": "acme", "scopes": ["read"], "form_token": token, **fields}
    return client.post("/manage/api-keys/", data)


def test_a_new_key_is_shown_once_then_only_its_prefix(client: Any, ada: Any) -> None:
    signed_in(client, ada)
    response = new_key(client, name="prod", scopes=["ingest", "read"])
    # The secret is in the POST's own answer, never kept anywhere for a later GET.
    assert response.status_code == 200 and "no-store" in response["Cache-Control"]
    secret = response.context["secret"]
    assert secret.startswith("kgi_") and secret.encode() in response.content
    key = ApiKey.objects.get(hash=hash_key(secret))
    assert key.tenant.slug == "acme" and key.scopes == ["ingest", "read"] and key.created_by == ada
    later = client.get("/manage/api-keys/")
    assert secret.encode() not in later.content and key.prefix.encode() in later.content


def test_a_new_keys_secret_is_stored_in_no_session(client: Any, ada: Any) -> None:
    from django.contrib.sessions.models import Session

    signed_in(client, ada)
    response = new_key(client, name="prod")
    stored = [row.session_data + json.dumps(row.get_decoded()) for row in Session.objects.all()]
    cookies = [morsel.value for morsel in response.cookies.values()]
    # Until now the answer was a redirect, and the GET after it showed the secret.
    page = response if response.status_code == 200 else client.get("/manage/api-keys/")
    secret = page.context["secret"]
    assert secret.startswith("kgi_") and stored
    assert not any(secret in data for data in stored + cookies)


def test_posting_the_form_again_makes_no_second_key(client: Any, ada: Any) -> None:
    signed_in(client, ada)
    token = client.get("/manage/api-keys/").context["form_token"]
    form = {"action": "create", "tenant": "acme", "scopes": ["read"], "form_token": token}
    secret = client.post("/manage/api-keys/", form).context["secret"]
    again = client.post("/manage/api-keys/", form, follow=True)  # the browser's reload of the answer
    assert ApiKey.objects.count() == 1
    assert secret.encode() not in again.content and b"already made its key" in again.content


def test_a_new_key_is_shown_to_its_creator_only(client: Any, ada: Any, acme: Tenant, django_user_model: Any) -> None:
    signed_in(client, ada)
    page = new_key(client, scopes=["review"]).content.decode()
    other = Client()
    other.force_login(ada)  # the same person in another browser: a session of its own
    assert other.get("/manage/api-keys/").context["secret"] == ""
    assert "kgi_" in page and "<strong>review</strong>: acknowledge, resolve and reopen violations" in page


def test_a_key_needs_scopes_and_an_administered_tenant(client: Any, ada: Any, gus: Any) -> None:
    signed_in(client, ada)
    response = client.post("/manage/api-keys/", {"action": "create", "tenant": "globex", "scopes": []})
    assert response.status_code == 400
    assert set(response.context["form"]["errors"]) == {"scopes", "tenant"}
    unbound = client.post("/manage/api-keys/", {"action": "create", "tenant": "", "scopes": ["read"]})
    assert unbound.status_code == 400
    assert not ApiKey.objects.exists()


def test_an_admin_revokes_a_key_of_their_tenant_only(
    client: Any, ada: Any, gus: Any, acme: Tenant, globex: Tenant
) -> None:
    mine, _ = ApiKey.issue(scopes=["read"], tenant=acme)
    theirs, _ = ApiKey.issue(scopes=["read"], tenant=globex)
    signed_in(client, ada)
    keys = list(client.get("/manage/api-keys/").context["keys"])
    assert keys == [mine]
    assert client.post("/manage/api-keys/", {"action": "revoke", "key": theirs.pk}).status_code == 404
    assert client.post("/manage/api-keys/", {"action": "revoke", "key": mine.pk}).status_code == 302
    mine.refresh_from_db()
    theirs.refresh_from_db()
    assert mine.revoked and not theirs.revoked


def test_a_new_key_gets_its_own_runtime_rate_or_the_default(client: Any, ada: Any) -> None:
    signed_in(client, ada)
    fleet = new_key(client, name="fleet", scopes=["evaluate"], runtime_rate="900/second")
    key = ApiKey.objects.get(hash=hash_key(fleet.context["secret"]))
    assert key.runtime_rate == "900/second"
    created = AuditEntry.objects.get(action="apikey.create", object_id=key.prefix)
    assert created.changes["runtimeRate"] == [None, "900/second"]
    plain = new_key(client, name="plain", scopes=["evaluate"])
    assert ApiKey.objects.get(hash=hash_key(plain.context["secret"])).runtime_rate == ""
    refused = new_key(client, name="typo", scopes=["evaluate"], runtime_rate="fast")
    # The field is named, the form kept, and no key made.
    assert refused.status_code == 400 and set(refused.context["form"]["errors"]) == {"runtime_rate"}
    assert b"N/second, /minute, /hour or /day" in refused.content
    assert ApiKey.objects.count() == 2


def test_an_admin_changes_the_runtime_rate_of_their_tenants_keys_only(
    client: Any, ada: Any, gus: Any, acme: Tenant, globex: Tenant
) -> None:
    mine, _ = ApiKey.issue(scopes=["evaluate"], tenant=acme)
    theirs, _ = ApiKey.issue(scopes=["evaluate"], tenant=globex)
    signed_in(client, ada)
    changed = client.post("/manage/api-keys/", {"action": "runtime-rate", "key": mine.pk, "runtime_rate": "50/second"})
    assert changed.status_code == 302
    mine.refresh_from_db()
    assert mine.runtime_rate == "50/second"
    event = AuditEntry.objects.get(action="apikey.runtime-rate")
    assert event.changes == {"runtimeRate": ["", "50/second"]} and event.object_id == mine.prefix
    # Another tenant's key is not found, and keeps its rate.
    foreign = client.post("/manage/api-keys/", {"action": "runtime-rate", "key": theirs.pk, "runtime_rate": "1/day"})
    assert foreign.status_code == 404
    theirs.refresh_from_db()
    assert theirs.runtime_rate == ""
    # A bad rate changes nothing and says why; an empty one goes back to the default.
    page = client.post(
        "/manage/api-keys/", {"action": "runtime-rate", "key": mine.pk, "runtime_rate": "lots"}, follow=True
    )
    assert "runtime rate not changed" in page.content.decode()
    mine.refresh_from_db()
    assert mine.runtime_rate == "50/second"
    client.post("/manage/api-keys/", {"action": "runtime-rate", "key": mine.pk, "runtime_rate": ""})
    mine.refresh_from_db()
    assert mine.runtime_rate == ""
    # A reviewer of acme is no admin: the page and its actions are closed to them.
    bob = member("bob-reviewer", acme, "reviewer")
    signed_in(client, bob)
    closed = client.post("/manage/api-keys/", {"action": "runtime-rate", "key": mine.pk, "runtime_rate": "1/day"})
    assert closed.status_code in (302, 403, 404)
    mine.refresh_from_db()
    assert mine.runtime_rate == ""


def test_the_key_list_takes_a_fixed_number_of_queries(client: Any, ada: Any, acme: Tenant) -> None:
    counts = []
    for size in (2, 20):
        for _ in range(size):
            ApiKey.issue(scopes=["read"], tenant=acme, created_by=ada)
        signed_in(client, ada)
        with CaptureQueriesContext(connection) as queries:
            assert client.get("/manage/api-keys/").status_code == 200
        counts.append(len(queries))
    assert counts[0] == counts[1]


# ------------------------------------------------------------------ invitations


def test_an_admin_invites_a_new_person_by_email(client: Any, ada: Any, acme: Tenant, mailoutbox: Any) -> None:
    signed_in(client, ada)
    response = client.post(
        "/manage/members/",
        {"tenant": "acme", "action": "add", "username": "Nora.Reviewer@example.org", "role": "reviewer"},
    )
    assert response.status_code == 302
    invited = Membership.objects.get(tenant=acme, role="reviewer").user
    assert invited.email == "Nora.Reviewer@example.org" and not invited.has_usable_password()
    assert len(mailoutbox) == 1 and mailoutbox[0].to == ["Nora.Reviewer@example.org"]
    link = next(word for word in mailoutbox[0].body.split() if "/invitation/" in word)
    guest = Client()
    form_page = guest.get(link, follow=True)
    assert form_page.status_code == 200 and form_page.context["validlink"]
    done = guest.post(
        form_page.redirect_chain[-1][0] if form_page.redirect_chain else link,
        {"new_password1": "a long new password 9", "new_password2": "a long new password 9"},
    )
    assert done.status_code == 302
    assert guest.get("/violations/").status_code == 200  # signed in, in acme
    assert Client().login(username=invited.username, password="a long new password 9")
    # The link works once.
    assert not Client().get(link, follow=True).context["validlink"]


def test_an_address_of_an_account_adds_that_person_without_mail(
    client: Any, ada: Any, gus: Any, acme: Tenant, mailoutbox: Any
) -> None:
    signed_in(client, ada)
    client.post(
        "/manage/members/", {"tenant": "acme", "action": "add", "username": "GUS@example.org", "role": "author"}
    )
    assert Membership.objects.get(tenant=acme, user=gus).role == "author" and mailoutbox == []
    again = client.post(
        "/manage/members/", {"tenant": "acme", "action": "add", "username": "gus@example.org", "role": "author"}
    )
    assert again.status_code == 400 and "already a member" in again.content.decode()
    bad = client.post(
        "/manage/members/", {"tenant": "acme", "action": "add", "username": "not@an@address", "role": "author"}
    )
    assert bad.status_code == 400


def test_charlie_cannot_invite_into_acme(client: Any, gus: Any, acme: Tenant, mailoutbox: Any) -> None:
    signed_in(client, gus)
    response = client.post(
        "/manage/members/", {"tenant": "acme", "action": "add", "username": "x@example.org", "role": "admin"}
    )
    assert response.status_code == 404 and mailoutbox == []
    assert not Membership.objects.filter(tenant=acme, user__email="x@example.org").exists()


def test_the_members_page_has_one_tenant_selector(client: Any, ada: Any, acme: Tenant, globex: Tenant) -> None:
    Membership.objects.create(user=ada, tenant=globex, role="admin")
    page = signed_in(client, ada).get("/manage/members/").content.decode()
    assert page.count('name="tenant" data-tenant-switcher') + page.count("data-tenant-switcher") >= 1
    assert 'id="member-tenant"' not in page


def test_a_tenant_admin_cannot_make_a_key_that_reads_the_metrics(client: Any, ada: Any) -> None:
    signed_in(client, ada)
    response = client.post("/manage/api-keys/", {"action": "create", "tenant": "acme", "scopes": ["metrics"]})
    assert response.status_code == 400
    assert set(response.context["form"]["errors"]) == {"scopes"}
    assert not ApiKey.objects.exists()
