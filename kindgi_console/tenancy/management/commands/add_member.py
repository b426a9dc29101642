"""`manage.py add_member USERNAME --tenant SLUG [--role reviewer|author|admin]`."""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser

from kindgi_console.audit.log import acting_as
from kindgi_console.tenancy.changes import add_member, change_role
from kindgi_console.tenancy.models import Membership, Tenant


class Command(BaseCommand):
    help = "Gives an existing user a role in a tenant (or changes the role they have there)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("username", help="an existing user (createsuperuser, the admin site)")
        parser.add_argument("--tenant", required=True, help="the tenant's id (its slug)")
        parser.add_argument(
            "--role",
            default=Membership.Role.REVIEWER,
            choices=Membership.Role.values,
            help="reviewer reads, author also writes, admin also manages (default reviewer)",
        )

    def handle(self, *args: Any, username: str, tenant: str, role: str, **options: Any) -> None:
        user = get_user_model().objects.filter(username=username).first()
        if user is None:
            raise CommandError(f"there is no user {username!r} (create it with createsuperuser or the admin site)")
        bound = Tenant.objects.filter(slug=tenant).first()
        if bound is None:
            raise CommandError(f"there is no tenant {tenant!r} (create it with create_tenant)")
        membership = Membership.objects.filter(user=user, tenant=bound).first()
        with acting_as("command:add_member"):
            if membership is None:
                add_member(user, bound, role)
            elif membership.role != role:
                change_role(membership, role)
        self.stdout.write(f"{username} is {role} in {tenant}")
