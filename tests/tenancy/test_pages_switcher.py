"""The sign-in page, the current tenant and the tenant switcher."""

import pytest
from django.contrib.auth.models import User

from kindgi_console.tenancy.models import Membership, Tenant
from kindgi_console.tenancy.scoping import SESSION_TENANT


@pytest.fixture
def dana(db):
    """Dana reviews for both acme and globex."""
    user = User.objects.create_user("dana", password="pw-dana-123")
    for slug in ("acme", "globex"):
        tenant, _ = Tenant.objects.get_or_create(slug=slug, defaults={"name": slug.title()})
        Membership.objects.create(user=user, tenant=tenant, role="reviewer")
    return user


def test_it_shows_the_sign_in_page(client, db):
    response = client.get("/login/")
    assert response.status_code == 200
    assert b"Sign in" in response.content


def test_it_signs_in_and_out(client, dana):
    response = client.post("/login/", {"username": "dana", "password": "pw-dana-123"})
    assert response.status_code == 302
    assert client.session.get("_auth_user_id") == str(dana.pk)
    client.post("/logout/")
    assert "_auth_user_id" not in client.session


def test_it_switches_to_a_tenant_of_the_person(client, dana):
    client.force_login(dana)
    response = client.post("/switch-tenant/", {"tenant": "globex", "next": "/login/"})
    assert response.status_code == 302
    assert response["Location"] == "/login/"
    assert client.session[SESSION_TENANT] == "globex"


def test_it_refuses_a_tenant_the_person_does_not_belong_to(client, dana):
    Tenant.objects.create(slug="initech")
    client.force_login(dana)
    client.post("/switch-tenant/", {"tenant": "initech"})
    assert SESSION_TENANT not in client.session


def test_it_never_redirects_off_site(client, dana):
    client.force_login(dana)
    response = client.post("/switch-tenant/", {"tenant": "acme", "next": "https://evil.example/"})
    assert response["Location"] == "/"
