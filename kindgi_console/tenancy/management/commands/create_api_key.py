"""`manage.py create_api_key [--tenant SLUG] --scopes S[,S…]`: prints the key once."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from kindgi_console.audit.log import acting_as
from kindgi_console.tenancy.changes import issue_key
from kindgi_console.tenancy.models import OPERATOR_SCOPES, SCOPES, Tenant


class Command(BaseCommand):
    help = (
        "Creates an API key and prints it once, alone on the last line. "
        f"Scopes: {', '.join(SCOPES)}; for a key bound to no tenant also {', '.join(OPERATOR_SCOPES)}. "
        "Only a hash of the key is stored."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--tenant", help="the tenant the key acts for (only that one)")
        parser.add_argument("--scopes", required=True, help="comma-separated: " + ",".join(SCOPES + OPERATOR_SCOPES))
        parser.add_argument("--name", default="", help="what the key is for")

    def handle(self, *args: Any, tenant: str | None, scopes: str, name: str, **options: Any) -> None:
        wanted = parse_scopes(scopes)
        bound = None
        if tenant:
            bound = Tenant.objects.filter(slug=tenant).first()
            if bound is None:
                raise CommandError(f"there is no tenant {tenant!r} (create it with create_tenant)")
        elif "ingest" in wanted:
            raise CommandError("a key with the ingest scope must be bound to a tenant: use --tenant")
        operator = [scope for scope in wanted if scope in OPERATOR_SCOPES]
        if bound is not None and operator:
            raise CommandError(f"the {operator[0]} scope is the operator's: a key with it is bound to no tenant")
        with acting_as("command:create_api_key"):
            key, secret = issue_key(scopes=wanted, tenant=bound, name=name)
        where = f"tenant {bound.slug}" if bound else "no tenant"
        self.stdout.write(f"created API key {key.prefix}… ({', '.join(key.scopes)}; {where})")
        self.stdout.write("This key is shown once; store it now:")
        self.stdout.write(secret)


def parse_scopes(text: str) -> list[str]:
    """The scopes of a comma-separated list, refusing unknown or missing ones."""
    scopes = [part.strip() for part in text.split(",") if part.strip()]
    if not scopes:
        raise CommandError("give at least one scope: " + ", ".join(SCOPES))
    unknown = [scope for scope in scopes if scope not in SCOPES + OPERATOR_SCOPES]
    if unknown:
        raise CommandError(f"unknown scope {unknown[0]!r}: use {', '.join(SCOPES + OPERATOR_SCOPES)}")
    return scopes
