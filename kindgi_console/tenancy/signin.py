"""Sign-in with a limit on failed attempts, counted in the shared cache.

Forty wrong passwords in a row were all answered. Failures are counted per username and
address, and per address alone, in Django's cache (Redis or the database: shared by every
process); past the limit the page answers 429 until the window has passed, even for the
right password, so that guessing does not pay.
"""

from __future__ import annotations

import contextlib
import hashlib
from typing import Any

from django.conf import settings
from django.contrib.admin.forms import AdminAuthenticationForm
from django.contrib.auth import views as auth_views
from django.contrib.auth.forms import AuthenticationForm
from django.core.cache import cache
from django.core.exceptions import ValidationError
from django.http import HttpRequest, HttpResponse

from kindgi_console.api import CACHE_DOWN

#: How many failures per address may name other usernames (a password sprayed over users).
ADDRESS_FACTOR = 10


def _address(request: HttpRequest | None) -> str:
    return str(request.META.get("REMOTE_ADDR", "")) if request is not None else ""


def _keys(request: HttpRequest | None, username: str) -> list[tuple[str, int]]:
    """The counters a sign-in attempt is held to, each with its limit."""
    limit = settings.KINDGI_SIGNIN_FAILURES
    pair = hashlib.sha256(f"{username.casefold()}|{_address(request)}".encode()).hexdigest()
    return [(f"signin:user:{pair}", limit), (f"signin:addr:{_address(request)}", limit * ADDRESS_FACTOR)]


def is_blocked(request: HttpRequest | None, username: str) -> bool:
    """Whether the window's failures are used up (not when the cache cannot be reached)."""
    try:
        return any(int(cache.get(key) or 0) >= limit for key, limit in _keys(request, username))
    except CACHE_DOWN:
        return False


def count_failure(request: HttpRequest | None, username: str) -> None:
    with contextlib.suppress(*CACHE_DOWN):  # the cache is down: the sign-in still answers
        _count_failure(request, username)


def _count_failure(request: HttpRequest | None, username: str) -> None:
    window = settings.KINDGI_SIGNIN_WINDOW_S
    for key, _ in _keys(request, username):
        if cache.add(key, 1, timeout=window):
            continue
        try:
            cache.incr(key)
        except ValueError:  # expired between add and incr
            cache.add(key, 1, timeout=window)


class ThrottledFormMixin:
    """A sign-in form that refuses early once the failures of the window are used up."""

    blocked = False
    data: Any
    request: HttpRequest | None

    def clean(self) -> dict[str, Any]:
        username = str(self.data.get("username", ""))
        if is_blocked(self.request, username):
            self.blocked = True
            minutes = max(1, settings.KINDGI_SIGNIN_WINDOW_S // 60)
            raise ValidationError(f"Too many failed sign-ins: try again in {minutes} minutes.", code="throttled")
        try:
            cleaned: dict[str, Any] = super().clean()  # type: ignore[misc]
        except ValidationError:
            count_failure(self.request, username)
            raise
        return cleaned


class ThrottledAuthenticationForm(ThrottledFormMixin, AuthenticationForm):
    """The console's sign-in form."""


class ThrottledAdminAuthenticationForm(ThrottledFormMixin, AdminAuthenticationForm):
    """The Django admin's sign-in form, held to the same counters."""


class SignInView(auth_views.LoginView):
    """Django's sign-in page with `ThrottledAuthenticationForm`; 429 while blocked."""

    authentication_form = ThrottledAuthenticationForm
    redirect_authenticated_user = True

    def form_invalid(self, form: Any) -> HttpResponse:
        response = super().form_invalid(form)
        if getattr(form, "blocked", False):
            response.status_code = 429
            response["Retry-After"] = str(settings.KINDGI_SIGNIN_WINDOW_S)
        return response
