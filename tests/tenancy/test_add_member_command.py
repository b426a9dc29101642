"""`manage.py add_member`: the README's way to give a person a role in a tenant."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.core.management import CommandError, call_command

from kindgi_console.audit.models import AuditEntry
from kindgi_console.tenancy.models import Membership, Tenant

pytestmark = pytest.mark.django_db


def test_it_adds_a_member_with_a_role(acme: Tenant) -> None:
    dora = User.objects.create_user("dora", "dora@example.org", "correct horse 42")
    call_command("add_member", "dora", "--tenant", "acme", "--role", "author")
    assert Membership.objects.get(user=dora, tenant=acme).role == "author"
    entry = AuditEntry.objects.filter(action="member.add").get()
    assert entry.actor == "command:add_member"


def test_it_changes_the_role_of_a_member(alice: User, acme: Tenant) -> None:
    call_command("add_member", "alice", "--tenant", "acme", "--role", "admin")
    assert Membership.objects.get(user=alice, tenant=acme).role == "admin"
    assert AuditEntry.objects.filter(action="member.role").count() == 1


def test_it_adds_a_reviewer_by_default(charlie: User, acme: Tenant) -> None:
    call_command("add_member", "charlie", "--tenant", "acme")
    assert Membership.objects.get(user=charlie, tenant=acme).role == "reviewer"
    assert Membership.objects.get(user=charlie, tenant__slug="globex").role == "author"


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["nobody", "--tenant", "acme"], "there is no user 'nobody'"),
        (["alice", "--tenant", "nowhere"], "there is no tenant 'nowhere'"),
    ],
)
def test_it_names_what_is_missing(alice: User, argv: list[str], message: str) -> None:
    with pytest.raises(CommandError, match=message):
        call_command("add_member", *argv)
    assert Membership.objects.count() == 1
