"""The settings' readers: the declared environment (kindgi_console/environment.py), with a
bad value turned into ImproperlyConfigured, so that a typo in a deployment's environment
stops start-up with a message naming the variable instead of silently using a default."""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import ParamSpec, TypeVar

from django.core.exceptions import ImproperlyConfigured

from kindgi_console import environment

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
