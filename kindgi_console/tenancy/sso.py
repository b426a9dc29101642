"""Single sign-on with OpenID Connect: mozilla-django-oidc's code flow, held to the console's rules.

The library does the authorization code flow with state, nonce and PKCE; this module adds what
it leaves out or what the console needs:

- the provider's endpoints read from its discovery document (`ISSUER/.well-known/openid-
  configuration`, whose `issuer` must be the configured one), unless set one by one;
- the ID token checked for its audience (this console's client id), issuer and expiry, not
  only its signature; the userinfo's `sub` must be the token's;
- an account is the provider's subject (`SSOIdentity`), made at the first sign-in only when
  `KINDGI_OIDC_GROUPS` grants the person a membership, and refused with a page saying why
  otherwise (no account is made);
- at each sign-in the memberships that single sign-on granted (`Membership.sso`) follow the
  groups: a group removed at the provider removes the membership it granted, a changed role
  changes it; a membership granted by hand is never touched;
- every sign-in, and every refusal after the provider answered, goes to the audit log.
"""

from __future__ import annotations

import hashlib
import logging
import time
from typing import Any

import httpx
import jwt
import requests
from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.backends import ModelBackend
from django.contrib.auth.validators import UnicodeUsernameValidator
from django.core.exceptions import SuspiciousOperation, ValidationError
from django.db import transaction
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils import timezone
from mozilla_django_oidc.auth import OIDCAuthenticationBackend
from mozilla_django_oidc.views import OIDCAuthenticationCallbackView, OIDCAuthenticationRequestView

from kindgi_console.audit import log as audit
from kindgi_console.tenancy import changes
from kindgi_console.tenancy.models import Membership, SSOIdentity, Tenant
from kindgi_console.tenancy.signin import record_sign_in
from kindgi_console.tenancy.sso_groups import MAX_GROUP_LENGTH, MAX_GROUPS, granted

logger = logging.getLogger(__name__)

#: How long a discovery document is kept before it is read again.
DISCOVERY_TTL_S = 3600
#: The longest query parameters the callback accepts.
MAX_CODE = 2048
MAX_STATE = 256
#: The request attribute where the backend leaves why it refused.
REFUSAL = "_kindgi_sso_refusal"
EXCHANGED = "_kindgi_sso_exchanged"
ACTOR = "sso"

_discovered: dict[str, tuple[float, dict[str, Any]]] = {}


class ProviderUnavailable(Exception):
    """The provider's discovery document could not be read or does not fit."""


def enabled() -> bool:
    return bool(settings.KINDGI_OIDC_ISSUER and settings.KINDGI_OIDC_CLIENT_ID)


def discovery() -> dict[str, Any]:
    """The provider's discovery document, read at most once an hour per process."""
    issuer = settings.KINDGI_OIDC_ISSUER
    cached = _discovered.get(issuer)
    if cached is not None and time.monotonic() - cached[0] < DISCOVERY_TTL_S:
        return cached[1]
    url = f"{issuer}/.well-known/openid-configuration"
    try:
        answer = httpx.get(url, timeout=settings.OIDC_TIMEOUT)
        answer.raise_for_status()
        document = answer.json()
    except (httpx.HTTPError, ValueError) as error:
        raise ProviderUnavailable(f"{url}: {error}") from None
    if not isinstance(document, dict) or document.get("issuer", "").rstrip("/") != issuer:
        raise ProviderUnavailable(f"{url}: its issuer is not KINDGI_OIDC_ISSUER ({issuer})")
    _discovered[issuer] = (time.monotonic(), document)
    return document


def endpoint(name: str) -> str:
    """An endpoint of the provider: the one set (KINDGI_OIDC_TOKEN_ENDPOINT, ...), else the discovered one."""
    explicit: str = settings.KINDGI_OIDC_ENDPOINTS.get(name, "")
    if explicit:
        return explicit
    value = discovery().get(name)
    if not isinstance(value, str) or not value.startswith(("https://", "http://")):
        raise ProviderUnavailable(f"the provider's discovery document has no {name}")
    return value


class Refused(Exception):
    """A person the provider signed in who may not enter the console, and why."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def _groups(claims: dict[str, Any]) -> list[str]:
    value = claims.get(settings.KINDGI_OIDC_GROUPS_CLAIM, [])
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or len(value) > MAX_GROUPS:
        raise Refused(
            "bad-groups", f"The provider's {settings.KINDGI_OIDC_GROUPS_CLAIM!r} claim is not a list of groups."
        )
    return [group for group in value if isinstance(group, str) and 0 < len(group) <= MAX_GROUP_LENGTH]


def _username(claims: dict[str, Any], subject: str) -> str:
    """The new account's name: the username claim, else the e-mail, else one made from the subject."""
    for claim in (settings.KINDGI_OIDC_USERNAME_CLAIM, "email"):
        value = claims.get(claim)
        if isinstance(value, str) and 0 < len(value) <= 150:
            try:
                UnicodeUsernameValidator()(value)
            except ValidationError:
                continue
            return value
    return "sso-" + hashlib.sha256(subject.encode()).hexdigest()[:16]


def _sync(user: Any, wanted: dict[str, Tenant], roles: dict[str, str]) -> None:
    """Make the memberships single sign-on manages what the groups grant; leave the others."""
    current = {m.tenant.slug: m for m in Membership.objects.filter(user=user).select_related("tenant", "user")}
    for slug, membership in current.items():
        if membership.sso and slug not in wanted:
            changes.remove_member(membership)
    for slug, tenant in wanted.items():
        held = current.get(slug)
        if held is None:
            changes.add_member(user, tenant, roles[slug], sso=True)
        elif held.sso and held.role != roles[slug]:
            changes.change_role(held, roles[slug])


def _refuse(user: Any, subject: str, code: str, message: str) -> Refused:
    """The refusal, written to the audit log in a transaction of its own."""
    with transaction.atomic():
        audit.record(
            "user.signin-refused",
            user,
            after={"method": "sso", "reason": code, "subject": subject},
            tenant=None,
            object_id=user.get_username() if user is not None else subject,
            object_repr=user.get_username() if user is not None else f"{settings.KINDGI_OIDC_ISSUER} {subject}",
            actor=ACTOR,
        )
    return Refused(code, message)


NO_GRANT = "Your groups at the provider give you no tenant in this console."


def sign_in(claims: dict[str, Any]) -> Any:
    """The account of the person whose verified claims these are, its memberships synced; Refused."""
    subject = claims.get("sub")
    if not isinstance(subject, str) or not 0 < len(subject) <= 255:
        raise Refused("bad-subject", "The provider's answer names no subject.")
    roles = granted(settings.KINDGI_OIDC_GROUPS, _groups(claims))
    wanted = {tenant.slug: tenant for tenant in Tenant.objects.filter(slug__in=roles)}
    for slug in sorted(set(roles) - set(wanted)):
        logger.warning("KINDGI_OIDC_GROUPS grants the tenant %r, which does not exist", slug)
    issuer = settings.KINDGI_OIDC_ISSUER
    User = get_user_model()
    with transaction.atomic(), audit.acting_as(ACTOR):
        identity = SSOIdentity.objects.select_for_update().filter(issuer=issuer, subject=subject).first()
        if identity is None:
            username = _username(claims, subject)
            if not wanted:
                refusal = ("no-grant", f"{NO_GRANT} No account was made for you.")
            elif User.objects.filter(username__iexact=username).exists():
                refusal = (
                    "username-taken",
                    f"An account named {username!r} exists already and was not made by single sign-on: "
                    "ask an administrator.",
                )
            else:
                email = claims.get("email")
                user = User.objects.create_user(username, email=email if isinstance(email, str) else "")
                identity = SSOIdentity.objects.create(user=user, issuer=issuer, subject=subject)
                audit.record("user.create", user, after={"username": username, "via": "sso"}, tenant=None)
        if identity is not None:
            user = identity.user
            _sync(user, wanted, roles)  # kept even when the person is refused below
            identity.last_sign_in_at = timezone.now()
            identity.save(update_fields=["last_sign_in_at"])
    if identity is None:
        raise _refuse(None, subject, *refusal)  # no account was made
    if not user.is_active:
        raise _refuse(user, subject, "inactive", "Your account is turned off.")
    if not user.is_superuser and not Membership.objects.filter(user=user).exists():
        raise _refuse(user, subject, "no-grant", NO_GRANT)
    return user


class SSOBackend(OIDCAuthenticationBackend):  # type: ignore[misc]
    """mozilla-django-oidc's backend, with discovered endpoints and a full check of the ID token.

    Django builds a backend for every request that has a session (`get_user`), so nothing
    here reads the provider before a sign-in needs it.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.UserModel = get_user_model()
        self.OIDC_RP_CLIENT_ID = settings.OIDC_RP_CLIENT_ID
        self.OIDC_RP_CLIENT_SECRET = settings.OIDC_RP_CLIENT_SECRET
        self.OIDC_RP_SIGN_ALGO = settings.OIDC_RP_SIGN_ALGO
        self.OIDC_RP_IDP_SIGN_KEY = None

    @property
    def OIDC_OP_TOKEN_ENDPOINT(self) -> str:
        return endpoint("token_endpoint")

    @property
    def OIDC_OP_USER_ENDPOINT(self) -> str:
        return endpoint("userinfo_endpoint")

    @property
    def OIDC_OP_JWKS_ENDPOINT(self) -> str:
        return endpoint("jwks_uri")

    def get_user(self, user_id: Any) -> Any:
        """The session's user, as Django's own backend gives it: none once the account is turned off."""
        return ModelBackend.get_user(self, user_id)

    def authenticate(self, request: HttpRequest | None, **kwargs: Any) -> Any:
        # Only the callback view's call (it passes the session's nonce); never a password form's.
        if request is None or "nonce" not in kwargs or "password" in kwargs or not enabled():
            return None
        return super().authenticate(request, **kwargs)

    def get_token(self, payload: dict[str, Any]) -> dict[str, Any]:
        answer: dict[str, Any] = super().get_token(payload)
        setattr(self.request, EXCHANGED, True)  # what fails from here on is audited
        return answer

    def _verify_jws(self, payload: str, key: Any) -> dict[str, Any]:
        """The token's claims once its signature, algorithm, audience, issuer and expiry hold."""
        try:
            algorithm = jwt.get_unverified_header(payload).get("alg")
            if algorithm != self.OIDC_RP_SIGN_ALGO:
                raise SuspiciousOperation(f"the ID token is signed with {algorithm!r}, not {self.OIDC_RP_SIGN_ALGO}")
            claims: dict[str, Any] = jwt.decode(
                payload,
                key,
                algorithms=[self.OIDC_RP_SIGN_ALGO],
                audience=self.OIDC_RP_CLIENT_ID,
                issuer=settings.KINDGI_OIDC_ISSUER,
                options={"require": ["exp", "iat", "iss", "aud", "sub"]},
                leeway=60,
            )
        except jwt.InvalidTokenError as error:
            raise SuspiciousOperation(f"the ID token: {error}") from None
        return claims

    def get_or_create_user(self, access_token: str, id_token: str, payload: dict[str, Any]) -> Any:
        info = self.get_userinfo(access_token, id_token, payload)
        if not isinstance(info, dict) or info.get("sub") != payload.get("sub"):
            raise SuspiciousOperation("the userinfo's subject is not the ID token's")
        try:
            return sign_in({**payload, **info})
        except Refused as refusal:
            setattr(self.request, REFUSAL, refusal)
            return None


def refused(request: HttpRequest, message: str, status: int = 403) -> HttpResponse:
    """The page that says why single sign-on did not let the person in."""
    context = {"message": message, "provider_name": settings.KINDGI_OIDC_PROVIDER_NAME}
    return render(request, "registration/sso_refused.html", context, status=status)


class SSOStartView(OIDCAuthenticationRequestView):  # type: ignore[misc]
    """Sends the browser to the provider (state, nonce and PKCE kept in the session)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super(OIDCAuthenticationRequestView, self).__init__(*args, **kwargs)  # not the library's: no settings read
        self.OIDC_RP_CLIENT_ID = settings.OIDC_RP_CLIENT_ID

    @property
    def OIDC_OP_AUTH_ENDPOINT(self) -> str:
        return endpoint("authorization_endpoint")

    def get(self, request: HttpRequest) -> HttpResponse:
        if not enabled():
            raise Http404("single sign-on is not configured")
        try:
            response: HttpResponse = super().get(request)
        except ProviderUnavailable as error:
            logger.warning("single sign-on: %s", error)
            return refused(request, "The sign-in provider cannot be reached: try again later.", status=503)
        return response


class SSOCallbackView(OIDCAuthenticationCallbackView):  # type: ignore[misc]
    """Where the provider sends the browser back: the code is exchanged and checked, then in or refused."""

    def get(self, request: HttpRequest) -> HttpResponse:
        if not enabled():
            raise Http404("single sign-on is not configured")
        if len(request.GET.get("code", "")) > MAX_CODE or len(request.GET.get("state", "")) > MAX_STATE:
            return refused(request, "The sign-in could not be verified.", status=400)
        try:
            response: HttpResponse = super().get(request)
        except SuspiciousOperation as error:  # a state, nonce, signature, audience or issuer that does not hold
            logger.warning("single sign-on refused: %s", error)
            if getattr(request, EXCHANGED, False):
                with transaction.atomic():
                    audit.record(
                        "user.signin-refused",
                        None,
                        after={"method": "sso", "reason": "unverified", "detail": str(error)[:200]},
                        tenant=None,
                        object_id="",
                        object_repr=settings.KINDGI_OIDC_ISSUER,
                        actor=ACTOR,
                    )
            return refused(request, "The sign-in could not be verified: start again.")
        except (requests.RequestException, ProviderUnavailable) as error:
            logger.warning("single sign-on: the provider did not answer: %s", error)
            return refused(request, "The sign-in provider did not answer: try again later.", status=502)
        return response

    def login_failure(self) -> HttpResponse:
        refusal = getattr(self.request, REFUSAL, None)
        if isinstance(refusal, Refused):
            return refused(self.request, refusal.message)
        error = self.request.GET.get("error", "")[:100]
        if error:
            return refused(self.request, f"The provider did not sign you in ({error}).")
        return refused(self.request, "The sign-in did not complete: start again.")

    def login_success(self) -> HttpResponse:
        response: HttpResponse = super().login_success()
        record_sign_in(self.user, "sso")
        return response
