"""create_tenant and create_api_key."""

from __future__ import annotations

import io

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from kindgi_console.tenancy.models import ApiKey, Tenant, hash_key

pytestmark = pytest.mark.django_db


def run(*args: str) -> str:
    out = io.StringIO()
    call_command(*args, stdout=out)
    return out.getvalue()


def test_it_creates_a_tenant() -> None:
    run("create_tenant", "acme", "--name", "Acme Corp")
    assert Tenant.objects.get(slug="acme").name == "Acme Corp"


def test_it_refuses_an_existing_tenant(acme: Tenant) -> None:
    with pytest.raises(CommandError, match="already exists"):
        run("create_tenant", "acme")


def test_it_refuses_a_tenant_id_that_is_not_a_slug() -> None:
    with pytest.raises(CommandError, match="not a valid tenant id"):
        run("create_tenant", "acme corp")


def test_it_prints_the_key_alone_on_the_last_line_and_stores_only_its_hash(acme: Tenant) -> None:
    output = run("create_api_key", "--tenant", "acme", "--scopes", "ingest,read")
    secret = output.strip().splitlines()[-1]
    key = ApiKey.objects.get()
    assert key.hash == hash_key(secret)
    assert secret not in (key.prefix, key.name, key.hash)
    assert key.tenant == acme
    assert key.scopes == ["ingest", "read"]


def test_a_key_for_no_tenant_may_author() -> None:
    run("create_api_key", "--scopes", "author,read")
    assert ApiKey.objects.get().tenant is None


def test_a_key_for_no_tenant_never_ingests() -> None:
    with pytest.raises(CommandError, match="--tenant"):
        run("create_api_key", "--scopes", "ingest")
    assert not ApiKey.objects.exists()


def test_it_refuses_an_unknown_scope(acme: Tenant) -> None:
    with pytest.raises(CommandError, match="unknown scope 'write'"):
        run("create_api_key", "--tenant", "acme", "--scopes", "read,write")


def test_it_refuses_an_unknown_tenant() -> None:
    with pytest.raises(CommandError, match="no tenant 'nowhere'"):
        run("create_api_key", "--tenant", "nowhere", "--scopes", "read")


def test_the_commands_exit_1_with_a_message(capsys: pytest.CaptureFixture[str]) -> None:
    from django.core.management import execute_from_command_line

    with pytest.raises(SystemExit) as exit_info:
        execute_from_command_line(["manage.py", "create_api_key", "--scopes", "nope"])
    assert exit_info.value.code == 1
    assert "unknown scope 'nope'" in capsys.readouterr().err


def test_a_key_for_no_tenant_may_read_the_metrics() -> None:
    run("create_api_key", "--scopes", "metrics", "--name", "prometheus")
    key = ApiKey.objects.get()
    assert (key.tenant, key.scopes) == (None, ["metrics"])


def test_a_tenant_s_key_never_reads_the_metrics(acme: Tenant) -> None:
    with pytest.raises(CommandError, match="the metrics scope is the operator's"):
        run("create_api_key", "--tenant", "acme", "--scopes", "read,metrics")
    assert not ApiKey.objects.exists()
