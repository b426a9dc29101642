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
    return RunTrace.objects.create(tenant=tenant, trace_id=trace_id, document={"id": trace_id},
                                   content_hash="0" * 64)


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


def test_the_page_mixin_scopes_by_the_signed_in_user(
    rf: Any, acme: Tenant, globex: Tenant, charlie: User
) -> None:
    from django.views.generic import ListView

    from kindgi_console.tenancy.views import TenantScopedMixin

    trace_in(acme, "a")
    trace_in(globex, "g")

    class TraceList(TenantScopedMixin, ListView):  # type: ignore[type-arg]
        model = RunTrace

    view = TraceList()
    request = rf.get("/traces/")
    request.user = charlie
    view.setup(request)
    assert [t.trace_id for t in view.get_queryset()] == ["g"]
