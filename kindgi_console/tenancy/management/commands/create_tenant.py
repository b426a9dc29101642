"""`manage.py create_tenant SLUG [--name NAME]`."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.core.validators import validate_slug

from kindgi_console.audit.log import acting_as
from kindgi_console.tenancy.changes import create_tenant
from kindgi_console.tenancy.models import Tenant


class Command(BaseCommand):
    help = "Creates a tenant."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("slug", help="the tenant id that traces name (letters, digits, - and _)")
        parser.add_argument("--name", default="", help="a human-readable name")

    def handle(self, *args: Any, slug: str, name: str, **options: Any) -> None:
        try:
            validate_slug(slug)
        except ValidationError:
            raise CommandError(
                f"{slug!r} is not a valid tenant id: use letters, digits, hyphens and underscores"
            ) from None
        if len(slug) > 100:
            raise CommandError("a tenant id has at most 100 characters")
        if Tenant.objects.filter(slug=slug).exists():
            raise CommandError(f"tenant {slug!r} already exists")
        with acting_as("command:create_tenant"):
            create_tenant(slug, name or slug)
        self.stdout.write(f"created tenant {slug}")
