"""Sign-in with a limit on failed attempts, counted in the shared cache.

Forty wrong passwords in a row were all answered. Failures are counted in Django's cache
(Redis or the database: shared by every process) per username and client address, per
address alone (a password sprayed over usernames) and per username alone (guessing spread
over many addresses); past a limit the page answers 429 until the window has passed, even
for the right password, so that guessing does not pay.

What is refused is a username from an address, never a username everywhere: the address is
the client's (`kindgi_console.proxies`: behind a trusted proxy, the one it forwarded), so
one client's failures do not lock out another client, and the per-username limit spares the
addresses the person signed in from before (`KNOWN_FOR_S`), so that a stranger's guesses
cannot lock a person out of where they usually sign in.
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
from django.db import transaction
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.urls import reverse
from django.utils.http import urlencode

from kindgi_console.audit import log as audit
from kindgi_console.proxies import client_address
from kindgi_console.throttling import CACHE_DOWN

#: How many failures per address may name other usernames (a password sprayed over users),
#: and per username may come from addresses it never signed in from, in times the limit.
ADDRESS_FACTOR = 10
#: How long an address a person signed in from stays theirs for the per-username limit.
KNOWN_FOR_S = 90 * 24 * 3600


def _address(request: HttpRequest | None) -> str:
    return client_address(request) if request is not None else ""


def _digest(*parts: str) -> str:
    return hashlib.sha256("|".join(parts).encode()).hexdigest()


def _pair(request: HttpRequest | None, username: str) -> str:
    return _digest(username.casefold(), _address(request))


def _keys(request: HttpRequest | None, username: str) -> list[tuple[str, int]]:
    """The counters a failed sign-in adds to, each with its limit."""
    limit = settings.KINDGI_SIGNIN_FAILURES
    return [
        (f"signin:user:{_pair(request, username)}", limit),
        (f"signin:addr:{_address(request)}", limit * ADDRESS_FACTOR),
        (f"signin:name:{_digest(username.casefold())}", limit * ADDRESS_FACTOR),
    ]


def _known_key(request: HttpRequest | None, username: str) -> str:
    return f"signin:known:{_pair(request, username)}"


def is_blocked(request: HttpRequest | None, username: str) -> bool:
    """Whether the window's failures are used up (not when the cache cannot be reached)."""
    try:
        keys = _keys(request, username)
        if cache.get(_known_key(request, username)):
            keys = keys[:2]  # an address the person signed in from: other addresses' guesses do not count
        return any(int(cache.get(key) or 0) >= limit for key, limit in keys)
    except CACHE_DOWN:
        return False


def remember_address(request: HttpRequest | None, username: str) -> None:
    """The person signed in from this address: the per-username limit spares it from now on."""
    with contextlib.suppress(*CACHE_DOWN):
        cache.set(_known_key(request, username), 1, timeout=KNOWN_FOR_S)


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
        remember_address(self.request, username)
        return cleaned


class ThrottledAuthenticationForm(ThrottledFormMixin, AuthenticationForm):
    """The console's sign-in form."""


class ThrottledAdminAuthenticationForm(ThrottledFormMixin, AdminAuthenticationForm):
    """The Django admin's sign-in form, held to the same counters."""


class SignInView(auth_views.LoginView):
    """Django's sign-in page with `ThrottledAuthenticationForm`; 429 while blocked.

    With single sign-on it also offers "Sign in with <provider>"; with `KINDGI_PASSWORD_SIGNIN`
    off it offers only that, and refuses a posted password form (403) before reading it.
    """

    authentication_form = ThrottledAuthenticationForm
    redirect_authenticated_user = True

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        context: dict[str, Any] = super().get_context_data(**kwargs)
        context["sso_enabled"] = bool(settings.KINDGI_OIDC_ISSUER and settings.KINDGI_OIDC_CLIENT_ID)
        context["sso_name"] = settings.KINDGI_OIDC_PROVIDER_NAME
        context["password_signin"] = settings.KINDGI_PASSWORD_SIGNIN
        return context

    def post(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if not settings.KINDGI_PASSWORD_SIGNIN:
            refused = self.render_to_response(self.get_context_data(password_refused=True))
            refused.status_code = 403
            return refused
        response: HttpResponse = super().post(request, *args, **kwargs)
        return response

    def form_valid(self, form: Any) -> HttpResponse:
        response = super().form_valid(form)
        record_sign_in(form.get_user(), "password")
        return response

    def form_invalid(self, form: Any) -> HttpResponse:
        response = super().form_invalid(form)
        if getattr(form, "blocked", False):
            response.status_code = 429
            response["Retry-After"] = str(settings.KINDGI_SIGNIN_WINDOW_S)
        return response


def record_sign_in(user: Any, method: str) -> None:
    """A sign-in in the audit log (the console's, not a tenant's): who, and how."""
    with transaction.atomic():
        audit.record(
            "user.signin", user, after={"method": method}, tenant=None, object_id=user.get_username(), actor=user
        )


def admin_sign_in(request: HttpRequest) -> HttpResponse:
    """The admin site's sign-in: the console's page when passwords are turned off."""
    if not settings.KINDGI_PASSWORD_SIGNIN:
        target = request.GET.get("next") or reverse("admin:index")
        return HttpResponseRedirect(f"{reverse('login')}?{urlencode({'next': target})}")
    from django.contrib import admin

    response: HttpResponse = admin.site.login(request)
    return response
