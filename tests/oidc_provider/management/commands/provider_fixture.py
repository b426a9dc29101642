"""Set the provider's client and people: `provider_fixture '{"client": {...}, "users": [...]}'`.

Each user is `{"username", "password", "email", "groups": [...]}`; the groups are set exactly
(a group left out is removed), so that a test can change them between two sign-ins.
"""

from __future__ import annotations

import json
from typing import Any

from django.contrib.auth.models import Group, User
from django.core.management.base import BaseCommand, CommandParser
from oauth2_provider.models import Application


class Command(BaseCommand):
    help = "Set the test provider's client and users"

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("fixture")

    def handle(self, *args: Any, **options: Any) -> None:
        fixture = json.loads(options["fixture"])
        client = fixture.get("client")
        if client:
            Application.objects.filter(client_id=client["id"]).delete()
            Application.objects.create(
                name="kindgi console",
                client_id=client["id"],
                client_secret=client["secret"],
                client_type=Application.CLIENT_CONFIDENTIAL,
                authorization_grant_type=Application.GRANT_AUTHORIZATION_CODE,
                redirect_uris=client["redirect_uri"],
                algorithm=Application.RS256_ALGORITHM,
                skip_authorization=True,
            )
        for person in fixture.get("users", []):
            user, _ = User.objects.get_or_create(username=person["username"])
            user.email = person.get("email", "")
            user.set_password(person["password"])
            user.save()
            user.groups.set([Group.objects.get_or_create(name=name)[0] for name in person.get("groups", [])])
