"""Invite someone to a tenant by e-mail: an account without a password is made for them, with
the membership, and Django's e-mail backend sends a one-time link where they choose their
password (Django's password-reset token: it stops working once a password is set)."""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.tokens import default_token_generator
from django.core.mail import send_mail
from django.http import HttpRequest
from django.urls import reverse
from django.utils.encoding import force_bytes
from django.utils.http import urlsafe_base64_encode
from django.utils.text import slugify

from kindgi_console.tenancy import changes
from kindgi_console.tenancy.models import Tenant

User = get_user_model()


def free_username(email: str) -> str:
    """A username from the address's local part, numbered when already taken."""
    base = slugify(email.split("@", 1)[0])[:140] or "member"
    name, number = base, 1
    while User.objects.filter(username=name).exists():
        number += 1
        name = f"{base}-{number}"
    return name


def invite(request: HttpRequest, tenant: Tenant, email: str, role: str) -> Any:
    """Make the account and membership, and e-mail the link; returns the new user."""
    user = User.objects.create_user(free_username(email), email=email)
    user.set_unusable_password()
    user.save(update_fields=["password"])
    changes.add_member(user, tenant, role)  # recorded in the audit log as any other addition
    link = request.build_absolute_uri(
        reverse(
            "invitation-accept",
            kwargs={
                "uidb64": urlsafe_base64_encode(force_bytes(user.pk)),
                "token": default_token_generator.make_token(user),
            },
        )
    )
    inviter = request.user.get_username()
    send_mail(
        subject=f"You are invited to {tenant.name or tenant.slug} on Kindgi Console",
        message=(
            f"{inviter} added you to {tenant.name or tenant.slug} as {role}.\n\n"
            f"Choose a password here (the link works once): {link}\n\n"
            f"Your username is {user.get_username()}.\n"
        ),
        from_email=None,
        recipient_list=[email],
    )
    return user
