"""Sign-in events in the audit log, and the single sign-on routes without a provider configured."""

import pytest
from django.contrib.auth.models import User

from kindgi_console.audit.models import AuditEntry


@pytest.mark.django_db
def test_a_password_sign_in_is_in_the_audit_log(client):
    User.objects.create_user("ivy", password="pw-ivy-123")
    assert client.post("/login/", {"username": "ivy", "password": "pw-ivy-123"}).status_code == 302
    entry = AuditEntry.objects.get(action="user.signin")
    assert (entry.actor, entry.object_id, entry.changes) == ("ivy", "ivy", {"method": [None, "password"]})
    client.post("/login/", {"username": "ivy", "password": "wrong"})
    assert AuditEntry.objects.filter(action="user.signin").count() == 1


@pytest.mark.django_db
def test_without_a_provider_there_is_no_single_sign_on(client):
    assert b"Sign in with" not in client.get("/login/").content
    assert client.get("/oidc/authenticate/").status_code == 404
    assert client.get("/oidc/callback/?code=a&state=b").status_code == 404


@pytest.mark.django_db
def test_an_oversized_callback_is_refused_before_anything_is_read(client, settings):
    settings.KINDGI_OIDC_ISSUER = "http://127.0.0.1:9/o"  # nothing listens: nothing may be called
    settings.KINDGI_OIDC_CLIENT_ID = settings.OIDC_RP_CLIENT_ID = "console"
    page = client.get("/login/")
    assert b"Sign in with single sign-on" in page.content
    answer = client.get("/oidc/callback/", {"code": "c" * 5000, "state": "s"})
    assert answer.status_code == 400
    assert b"could not be verified" in answer.content
    # No state of the session: refused without a call to the provider.
    answer = client.get("/oidc/callback/", {"code": "c", "state": "s"})
    assert answer.status_code == 403
    assert b"did not complete" in answer.content
    # A provider that cannot be reached: a page saying so, not a 500.
    answer = client.get("/oidc/authenticate/")
    assert answer.status_code == 503
    assert b"cannot be reached" in answer.content


@pytest.mark.django_db
def test_a_single_sign_on_session_ends_when_the_account_is_turned_off(client, settings):
    settings.AUTHENTICATION_BACKENDS = ["kindgi_console.tenancy.sso.SSOBackend"]
    jo = User.objects.create_user("jo")
    client.force_login(jo, backend="kindgi_console.tenancy.sso.SSOBackend")
    assert client.get("/login/").status_code == 302  # signed in: the sign-in page sends on
    User.objects.filter(pk=jo.pk).update(is_active=False)
    assert client.get("/login/").status_code == 200  # signed out
