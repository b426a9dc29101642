"""Typed readers for settings taken from the environment.

Each helper fails loudly (ImproperlyConfigured) on a value it cannot read, so that a
typo in a deployment's environment stops start-up instead of silently using a default.
"""

from __future__ import annotations

import os

from django.core.exceptions import ImproperlyConfigured

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


def envstr(name: str, default: str) -> str:
    """The variable's text, or the default when it is unset."""
    return os.environ.get(name, default)


def envbool(name: str, default: bool) -> bool:
    """A boolean: 1/true/yes/on or 0/false/no/off (any case)."""
    raw = os.environ.get(name)
    if raw is None:
        return default
    value = raw.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ImproperlyConfigured(f"{name}={raw!r} is not a boolean (use true or false)")


def envint(name: str, default: int, *, minimum: int | None = None) -> int:
    """An integer, optionally at least `minimum`."""
    raw = os.environ.get(name)
    if raw is None:
        return default
    try:
        value = int(raw.strip())
    except ValueError:
        raise ImproperlyConfigured(f"{name}={raw!r} is not an integer") from None
    if minimum is not None and value < minimum:
        raise ImproperlyConfigured(f"{name}={value} must be at least {minimum}")
    return value


def envlist(name: str, default: list[str]) -> list[str]:
    """A comma-separated list; blank items are dropped."""
    raw = os.environ.get(name)
    if raw is None:
        return list(default)
    return [item.strip() for item in raw.split(",") if item.strip()]
