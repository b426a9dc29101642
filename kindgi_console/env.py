"""The settings' readers: the declared environment (guardrails/engine/environment.py), with a
bad value turned into ImproperlyConfigured, so that a typo in a deployment's environment
stops start-up with a message naming the variable instead of silently using a default."""

from __future__ import annotations

import os
from collections.abc import Callable
from functools import wraps
from typing import ParamSpec, TypeVar

from django.core.exceptions import ImproperlyConfigured

from guardrails.engine import environment

P = ParamSpec("P")
T = TypeVar("T")


def _improperly_configured(read: Callable[P, T]) -> Callable[P, T]:
    @wraps(read)
    def reader(*args: P.args, **kwargs: P.kwargs) -> T:
        try:
            return read(*args, **kwargs)
        except environment.BadValue as error:
            raise ImproperlyConfigured(str(error)) from None

    return reader


text = _improperly_configured(environment.text)
flag = _improperly_configured(environment.flag)
whole = _improperly_configured(environment.whole)
items = _improperly_configured(environment.items)


# The readers of settings written before the declaration (a branch that adds `envint(...)`
# still merges and behaves as written); the declaration test names every variable read this
# way that guardrails/engine/environment.py does not declare yet, so it is declared at once.
def envstr(name: str, default: str) -> str:
    return environment.read_text(environment.Variable(name, "text", default, ""), None, os.environ)


@_improperly_configured
def envbool(name: str, default: bool) -> bool:
    return environment.read_flag(environment.Variable(name, "bool", default, ""), None, os.environ)


@_improperly_configured
def envint(name: str, default: int, *, minimum: int | None = None) -> int:
    return environment.read_whole(environment.Variable(name, "int", default, "", minimum), None, os.environ)


def envlist(name: str, default: list[str]) -> list[str]:
    return environment.read_items(environment.Variable(name, "list", tuple(default), ""), os.environ)
