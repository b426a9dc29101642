"""The Caller, TenantScopedQuerySet.for_caller and API key authentication."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.utils import timezone

from kindgi_console.tenancy.models import ApiKey, Tenant
from kindgi_console.tenancy.scoping import Caller, TenantDenied
from traces.models import RunTrace

pytestmark = pytest.mark.django_db


def trace_in(tenant: Tenant, trace_id: str) -> RunTrace:
    return RunTrace.objects.create(tenant=tenant, trace_id=trace_id, document={"id": trace_id}, content_hash="0" * 64)


def visible(caller: Caller, scope: str = "read") -> list[str]:
    return sorted(RunTrace.objects.for_caller(caller, scope).values_list("trace_id", flat=True))


def test_users_see_the_traces_of_their_tenants(
    acme: Tenant, globex: Tenant, alice: User, bob: User, charlie: User
) -> None:
    trace_in(acme, "a")
    trace_in(globex, "g")
    assert visible(Caller(user=alice)) == ["a"]
    assert visible(Caller(user=bob)) == ["a"]
    assert visible(Caller(user=charlie)) == ["g"]
    assert visible(Caller(user=bob), "ingest") == []  # a reviewer writes nothing


def test_keys_see_their_tenant_only_and_with_the_read_scope(acme: Tenant, globex: Tenant) -> None:
    trace_in(acme, "a")
    trace_in(globex, "g")
    reader = ApiKey.issue(scopes=["read"], tenant=acme)[0]
    writer = ApiKey.issue(scopes=["ingest"], tenant=acme)[0]
    unbound = ApiKey.issue(scopes=["read", "author"])[0]
    assert visible(Caller(key=reader)) == ["a"]
    assert visible(Caller(key=writer)) == []
    assert visible(Caller(key=unbound)) == []


def test_a_superuser_sees_every_tenant(acme: Tenant, globex: Tenant) -> None:
    trace_in(acme, "a")
    trace_in(globex, "g")
    root = User.objects.create_superuser("root", "root@example.org", "correct horse 42")
    assert visible(Caller(user=root)) == ["a", "g"]


def test_a_visitor_sees_nothing(acme: Tenant) -> None:
    from django.contrib.auth.models import AnonymousUser

    trace_in(acme, "a")
    assert visible(Caller(user=AnonymousUser())) == []


def test_writing_a_tenant(acme: Tenant, globex: Tenant, alice: User, bob: User) -> None:
    assert Caller(user=alice).tenant_for_write("acme", "ingest") == acme
    with pytest.raises(TenantDenied) as denied:
        Caller(user=alice).tenant_for_write("globex", "ingest")
    assert denied.value.status == 403
    with pytest.raises(TenantDenied):
        Caller(user=bob).tenant_for_write("acme", "ingest")
    with pytest.raises(TenantDenied) as missing:
        Caller(user=alice).tenant_for_write(None, "ingest")
    assert missing.value.status == 400
    key = ApiKey.issue(scopes=["ingest"], tenant=acme)[0]
    assert Caller(key=key).tenant_for_write(None, "ingest") == acme
    with pytest.raises(TenantDenied):
        Caller(key=key).tenant_for_write("globex", "ingest")


def test_a_keys_last_use_is_written_at_most_once_a_minute(
    api: Any, acme: Tenant, django_assert_num_queries: Any
) -> None:
    key, secret = ApiKey.issue(scopes=["read"], tenant=acme)
    api(secret).get("/api/v1/traces")
    first = ApiKey.objects.get(pk=key.pk).last_used_at
    assert first is not None
    api(secret).get("/api/v1/traces")
    assert ApiKey.objects.get(pk=key.pk).last_used_at == first
    ApiKey.objects.filter(pk=key.pk).update(last_used_at=first - timedelta(minutes=2))
    api(secret).get("/api/v1/traces")
    used = ApiKey.objects.get(pk=key.pk).last_used_at
    assert used is not None and first - timedelta(seconds=1) < used <= timezone.now()


def test_an_unknown_key_is_401_and_says_how_to_authenticate(api: Any, db: Any) -> None:
    response = api("kgi_not-a-key").get("/api/v1/traces")
    assert response.status_code == 401
    assert response["WWW-Authenticate"].startswith("Bearer")
    assert response.json() == {"errors": [{"path": "", "message": "unknown or revoked API key"}]}


@pytest.mark.parametrize("base", ["ListView", "View"])
def test_the_page_mixin_scopes_by_the_signed_in_user(
    rf: Any, acme: Tenant, globex: Tenant, charlie: User, base: str
) -> None:
    """A list view, and a plain view too."""
    from django.views import generic

    from kindgi_console.tenancy.views import TenantScopedMixin

    trace_in(acme, "a")
    trace_in(globex, "g")

    class TraceList(TenantScopedMixin, getattr(generic, base)):  # type: ignore[misc]
        model = RunTrace

    view = TraceList()
    request = rf.get("/traces/")
    request.user = charlie
    view.setup(request)
    assert [t.trace_id for t in view.get_queryset()] == ["g"]


def slugs(tenants: Any) -> list[str]:
    return sorted(tenants.values_list("slug", flat=True))


def test_the_tenants_a_caller_may_act_on(acme: Tenant, globex: Tenant, alice: User, bob: User, charlie: User) -> None:
    from django.contrib.auth.models import AnonymousUser

    root = User.objects.create_superuser("root", "root@example.org", "correct horse 42")
    assert slugs(Caller(user=alice).tenants()) == ["acme"]
    assert slugs(Caller(user=bob).tenants()) == ["acme"]
    assert slugs(Caller(user=bob).tenants("ingest")) == []  # a reviewer writes nothing
    assert slugs(Caller(user=charlie).tenants()) == ["globex"]
    assert slugs(Caller(user=root).tenants()) == ["acme", "globex"]
    assert slugs(Caller(user=AnonymousUser()).tenants()) == []
    reader = ApiKey.issue(scopes=["read"], tenant=acme)[0]
    unbound = ApiKey.issue(scopes=["read", "author"])[0]
    assert slugs(Caller(key=reader).tenants()) == ["acme"]
    assert slugs(Caller(key=reader).tenants("ingest")) == []
    assert slugs(Caller(key=unbound).tenants()) == []


def test_the_current_tenants_rows_are_the_switchers_tenant_only(
    rf: Any, acme: Tenant, globex: Tenant, alice: User, charlie: User
) -> None:
    from kindgi_console.tenancy.models import Membership
    from kindgi_console.tenancy.scoping import SESSION_TENANT, current_rows

    trace_in(acme, "a")
    trace_in(globex, "g")
    Membership.objects.create(user=alice, tenant=globex, role="reviewer")
    for chosen, expected in (("acme", ["a"]), ("globex", ["g"])):
        request = rf.get("/")
        request.user, request.session = alice, {SESSION_TENANT: chosen}
        assert sorted(current_rows(request, RunTrace.objects).values_list("trace_id", flat=True)) == expected
    request = rf.get("/")
    request.user, request.session = User.objects.create_user("nobody"), {}
    assert list(current_rows(request, RunTrace.objects)) == []  # no tenant: nothing


def test_who_administers_a_tenant(acme: Tenant, globex: Tenant, alice: User, charlie: User) -> None:
    from kindgi_console.tenancy.models import Membership
    from kindgi_console.tenancy.scoping import administered_tenants, administers_any, is_admin_of

    dana = User.objects.create_user("dana")
    Membership.objects.create(user=dana, tenant=acme, role="admin")
    root = User.objects.create_superuser("root", "root@example.org", "correct horse 42")
    assert is_admin_of(dana, acme) and not is_admin_of(dana, globex)
    assert not is_admin_of(alice, acme)  # an author is no admin
    assert not is_admin_of(charlie, acme)
    assert is_admin_of(root, globex) and not is_admin_of(root, None)
    assert slugs(administered_tenants(dana)) == ["acme"] and slugs(administered_tenants(root)) == ["acme", "globex"]
    assert administers_any(dana) and administers_any(root) and not administers_any(alice)


def test_may_in_the_current_tenant(rf: Any, acme: Tenant, alice: User, bob: User, charlie: User) -> None:
    from kindgi_console.tenancy.scoping import may_in_current_tenant

    def may(user: User, scope: str) -> bool:
        request = rf.get("/")
        request.user, request.session = user, {}
        return may_in_current_tenant(request, scope)

    assert may(alice, "author") and may(bob, "review") and not may(bob, "author")
    assert may(charlie, "author")  # in globex, charlie's current tenant
    assert not may(User.objects.create_user("nobody"), "read")
