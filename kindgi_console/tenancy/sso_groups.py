"""`KINDGI_OIDC_GROUPS`: which of the provider's groups grant which tenant and role.

Read once by settings.py, so that a bad mapping stops start-up with a message naming the
variable and the place in it (a JSON pointer), rather than refusing people at sign-in.
Two spellings:

- JSON: `{"eng": {"tenant": "acme", "role": "author"}, "ops": [{"tenant": "acme", "role":
  "admin"}, {"tenant": "beta", "role": "reviewer"}]}` (an object, or a list of them);
- plain: `eng=acme:author,ops=acme:admin,ops=beta:reviewer`.

A person in several groups that grant the same tenant gets the highest of the roles.
No Django model is imported here: settings.py imports this module.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from typing import Any

from django.core.exceptions import ImproperlyConfigured

#: The tenancy roles, lowest first (tenancy.models.ROLES, which settings cannot import).
ROLES = ("reviewer", "author", "admin")
SLUG = re.compile(r"^[-a-zA-Z0-9_]{1,100}$")
MAX_GROUPS = 1000
MAX_GROUP_LENGTH = 256
VARIABLE = "KINDGI_OIDC_GROUPS"

#: group -> [(tenant slug, role)]
Grants = dict[str, list[tuple[str, str]]]


def _pointer(*parts: str) -> str:
    return "/" + "/".join(part.replace("~", "~0").replace("/", "~1") for part in parts)


def _bad(where: str, message: str) -> ImproperlyConfigured:
    return ImproperlyConfigured(f"{VARIABLE}: {where}: {message}")


def _grant(group: str, value: Any, where: str) -> tuple[str, str]:
    if not isinstance(value, dict):
        raise _bad(where, 'must be an object {"tenant": ..., "role": ...}')
    unknown = sorted(set(value) - {"tenant", "role"})
    if unknown:
        raise _bad(f"{where}/{unknown[0]}", "is not a field (tenant, role)")
    tenant, role = value.get("tenant"), value.get("role")
    if not isinstance(tenant, str) or not SLUG.match(tenant):
        raise _bad(f"{where}/tenant", "must be a tenant's slug")
    if role not in ROLES:
        raise _bad(f"{where}/role", f"must be one of {', '.join(ROLES)}")
    return tenant, role


def _check_group(group: str, where: str) -> None:
    if not group or len(group) > MAX_GROUP_LENGTH:
        raise _bad(where, f"a group is 1 to {MAX_GROUP_LENGTH} characters")


def _from_json(text: str) -> Grants:
    try:
        document = json.loads(text)
    except ValueError as error:
        raise ImproperlyConfigured(f"{VARIABLE}: not JSON ({error})") from None
    if not isinstance(document, dict):
        raise _bad("/", "must be an object whose keys are groups")
    grants: Grants = {}
    for group, value in document.items():
        where = _pointer(group)
        _check_group(group, where)
        values = value if isinstance(value, list) else [value]
        if not values:
            raise _bad(where, "grants nothing (an empty list)")
        suffix = isinstance(value, list)
        grants[group] = [_grant(group, v, f"{where}/{i}" if suffix else where) for i, v in enumerate(values)]
    return grants


def _from_plain(text: str) -> Grants:
    grants: Grants = {}
    for index, item in enumerate(part.strip() for part in text.split(",")):
        if not item:
            continue
        where = f"item {index + 1} ({item!r})"
        group, equals, target = item.rpartition("=")
        tenant, colon, role = target.partition(":")
        if not equals or not colon:
            raise _bad(where, "must be group=tenant:role")
        _check_group(group.strip(), where)
        grants.setdefault(group.strip(), []).append(
            _grant(group, {"tenant": tenant.strip(), "role": role.strip()}, where)
        )
    return grants


def parse_groups(text: str) -> Grants:
    """The mapping `text` spells (JSON when it starts with `{` or `[`); ImproperlyConfigured otherwise."""
    text = text.strip()
    grants = _from_json(text) if text.startswith(("{", "[")) else _from_plain(text)
    if len(grants) > MAX_GROUPS:
        raise ImproperlyConfigured(f"{VARIABLE}: at most {MAX_GROUPS} groups")
    return grants


def granted(grants: Mapping[str, list[tuple[str, str]]], groups: Iterable[str]) -> dict[str, str]:
    """tenant slug -> the highest role that the person's `groups` grant there."""
    roles: dict[str, str] = {}
    for group in groups:
        for tenant, role in grants.get(group, ()):
            if tenant not in roles or ROLES.index(role) > ROLES.index(roles[tenant]):
                roles[tenant] = role
    return roles
