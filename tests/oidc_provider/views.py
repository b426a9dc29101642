"""The provider's groups claim, and an ID token made wrong on purpose for the tampering tests."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from django.http import HttpRequest, HttpResponse
from oauth2_provider import views as oauth2_views
from oauth2_provider.oauth2_validators import OAuth2Validator


class GroupsValidator(OAuth2Validator):  # type: ignore[misc]
    """Adds the person's Django groups as the `groups` claim (scope `groups`), and their names."""

    oidc_claim_scope = {**OAuth2Validator.oidc_claim_scope, "groups": "groups"}

    def get_additional_claims(self, request: Any) -> dict[str, Any]:
        user = request.user
        return {
            "preferred_username": user.username,
            "email": user.email,
            "groups": sorted(group.name for group in user.groups.all()),
        }


def other_key() -> str:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    return pem.decode()


def tampered(token: str, mode: str) -> str:
    """The ID token re-signed after a change: another audience or nonce, or another key (same kid)."""
    header = jwt.get_unverified_header(token)
    claims = jwt.decode(token, options={"verify_signature": False})
    key = os.environ["OIDC_PROVIDER_KEY"]
    if mode == "audience":
        claims["aud"] = "another-client"
    elif mode == "nonce":
        claims["nonce"] = "not-the-nonce-the-console-sent"
    elif mode == "signature":
        key = other_key()
    else:
        raise ValueError(mode)
    return jwt.encode(claims, key, algorithm=header["alg"], headers={"kid": header["kid"]})


class TamperingTokenView(oauth2_views.TokenView):  # type: ignore[misc]
    """The toolkit's token endpoint; while TAMPER_FILE names a mode, its ID tokens are made wrong."""

    def post(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        response: HttpResponse = super().post(request, *args, **kwargs)
        path = Path(os.environ["OIDC_PROVIDER_TAMPER_FILE"])
        mode = path.read_text().strip() if path.exists() else ""
        if mode and response.status_code == 200:
            body = json.loads(response.content)
            body["id_token"] = tampered(body["id_token"], mode)
            response.content = json.dumps(body).encode()
        return response
