"""The admin pages: tenants, their members and API keys, for a tenant's admins.

A person manages only the tenants where they are an admin (every tenant, for a
superuser); a tenant they do not administer is absent from these pages (404).
"""

from __future__ import annotations

import secrets
from typing import Any

from django.conf import settings
from django.contrib import messages
from django.contrib.auth import get_user_model
from django.contrib.auth.mixins import LoginRequiredMixin
from django.core.exceptions import PermissionDenied, ValidationError
from django.core.validators import validate_email
from django.db import IntegrityError, transaction
from django.db.models import Count, Exists, OuterRef, Q, QuerySet
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from django.urls import reverse
from django.utils.http import urlencode
from django.utils.text import slugify
from django.views import View

from kindgi_console.tenancy import changes, invitations
from kindgi_console.tenancy.models import SCOPES, ApiKey, Membership, Tenant
from kindgi_console.tenancy.scoping import administered_tenants, current_tenant

User = get_user_model()
NEW_KEY_SESSION = "kindgi:new-api-key"  # where a new key's secret used to wait: only removed now
USED_FORM_TOKENS = "kindgi:used-key-forms"
USED_FORM_TOKENS_KEPT = 20


class AdminPageMixin(LoginRequiredMixin):
    """Pages for people who administer at least one tenant; 404 for everyone else."""

    request: HttpRequest

    def dispatch(self, request: HttpRequest, *args: Any, **kwargs: Any) -> Any:
        if request.user.is_authenticated:
            self.tenants = list(administered_tenants(request.user).order_by("slug"))
            if not self.tenants and not request.user.is_superuser:
                raise Http404("not an admin of any tenant")
        return super().dispatch(request, *args, **kwargs)

    def chosen_tenant(self, slug: str | None) -> Tenant:
        """The tenant named by `slug` (else the current one, else the first administered)."""
        if slug:
            found = next((t for t in self.tenants if t.slug == slug), None)
            if found is None:
                raise Http404("not a tenant you administer")
            return found
        if not self.tenants:
            raise Http404("there is no tenant yet")
        current = current_tenant(self.request)
        return next((t for t in self.tenants if current and t.pk == current.pk), self.tenants[0])


# ---------------------------------------------------------------------------- tenants


class TenantListView(AdminPageMixin, View):
    """The tenants the person administers, with their member and key counts; superusers create."""

    template_name = "tenancy/tenant_list.html"

    def get(self, request: HttpRequest, form: dict[str, Any] | None = None, status: int = 200) -> HttpResponse:
        tenants = (
            Tenant.objects.filter(pk__in=[t.pk for t in self.tenants])
            .annotate(
                member_count=Count("memberships", distinct=True),
                key_count=Count("api_keys", filter=Q(api_keys__revoked_at__isnull=True), distinct=True),
            )
            .order_by("slug")
        )
        context = {"tenants": tenants, "form": form or {}, "can_create": request.user.is_superuser}
        return render(request, self.template_name, context, status=status)

    def post(self, request: HttpRequest) -> HttpResponse:
        if not request.user.is_superuser:
            raise PermissionDenied("only superusers create tenants")
        name = request.POST.get("name", "").strip()
        slug = request.POST.get("slug", "").strip() or slugify(name)
        form: dict[str, Any] = {"name": name, "slug": slug, "errors": {}}
        if not slug or slug != slugify(slug):
            form["errors"]["slug"] = "Use lowercase letters, digits and hyphens."
        elif Tenant.objects.filter(slug=slug).exists():
            form["errors"]["slug"] = f"A tenant {slug!r} already exists."
        if form["errors"]:
            return self.get(request, form, status=400)
        tenant = changes.create_tenant(slug, name, admin=request.user)
        messages.success(request, f"Tenant {tenant.slug} created; you are its admin.")
        return HttpResponseRedirect(f"{reverse('member-list')}?{urlencode({'tenant': tenant.slug})}")


# ---------------------------------------------------------------------------- members


class MemberListView(AdminPageMixin, View):
    """A tenant's members: add one by username with a role, change a role, remove one."""

    template_name = "tenancy/member_list.html"

    def get(self, request: HttpRequest, form: dict[str, Any] | None = None, status: int = 200) -> HttpResponse:
        tenant = self.chosen_tenant(request.GET.get("tenant"))
        members = (
            tenant.memberships.select_related("user")
            .annotate(key_count=Count("user__apikey", filter=Q(user__apikey__in=tenant.api_keys.active())))
            .order_by("user__username")
        )
        context = {
            "tenant": tenant,
            "tenants": self.tenants,
            "members": members,
            "roles": Membership.Role.choices,
            "form": form or {},
        }
        return render(request, self.template_name, context, status=status)

    def post(self, request: HttpRequest) -> HttpResponse:
        tenant = self.chosen_tenant(request.POST.get("tenant") or "-")
        action = request.POST.get("action")
        if action == "add":
            return self.add(request, tenant)
        membership = tenant.memberships.filter(pk=request.POST.get("membership") or 0).first()
        if membership is None:
            raise Http404("no such member")
        if action == "remove":
            return self.remove(request, tenant, membership)
        return self.change_role(request, tenant, membership)

    def back(self, tenant: Tenant) -> HttpResponse:
        return HttpResponseRedirect(f"{reverse('member-list')}?{urlencode({'tenant': tenant.slug})}")

    def add(self, request: HttpRequest, tenant: Tenant) -> HttpResponse:
        username = request.POST.get("username", "").strip()
        role = request.POST.get("role", "")
        form: dict[str, Any] = {"username": username, "role": role, "errors": {}}
        if "@" in username:
            return self.add_by_email(request, tenant, form)
        user = User.objects.filter(username=username).first() if username else None
        if user is None:
            form["errors"]["username"] = (
                f"There is no user {username!r}: enter their e-mail address to invite them."
                if username
                else "Enter a username or an e-mail address."
            )
        elif tenant.memberships.filter(user=user).exists():
            form["errors"]["username"] = f"{username} is already a member of {tenant.slug}."
        if role not in Membership.Role.values:
            form["errors"]["role"] = "Choose a role."
        if form["errors"]:
            query = request.GET.copy()
            query["tenant"] = tenant.slug
            request.GET = query  # type: ignore[assignment]  # the page is drawn again for this tenant
            return self.get(request, form, status=400)
        try:
            changes.add_member(user, tenant, role)
        except IntegrityError:
            messages.error(request, f"{username} is already a member of {tenant.slug}.")
            return self.back(tenant)
        messages.success(request, f"{username} is now {role} of {tenant.slug}.")
        return self.back(tenant)

    def add_by_email(self, request: HttpRequest, tenant: Tenant, form: dict[str, Any]) -> HttpResponse:
        """An address of an account: add that person; of nobody yet: invite them by e-mail."""
        email, role = form["username"], form["role"]
        try:
            validate_email(email)
        except ValidationError:
            form["errors"]["username"] = f"{email!r} is not an e-mail address."
        if role not in Membership.Role.values:
            form["errors"]["role"] = "Choose a role."
        known = User.objects.filter(email__iexact=email).first() if not form["errors"] else None
        if known is not None and tenant.memberships.filter(user=known).exists():
            form["errors"]["username"] = f"{email} is already a member of {tenant.slug}."
        if form["errors"]:
            query = request.GET.copy()
            query["tenant"] = tenant.slug
            request.GET = query  # type: ignore[assignment]  # the page is drawn again for this tenant
            return self.get(request, form, status=400)
        if known is not None:
            changes.add_member(known, tenant, role)
            messages.success(request, f"{known.get_username()} ({email}) is now {role} of {tenant.slug}.")
        else:
            with transaction.atomic():
                invited = invitations.invite(request, tenant, email, role)
            messages.success(
                request,
                f"Invitation sent to {email}: they join {tenant.slug} as {role} "
                f"(username {invited.get_username()}) once they choose a password.",
            )
        return self.back(tenant)

    def change_role(self, request: HttpRequest, tenant: Tenant, membership: Membership) -> HttpResponse:
        role = request.POST.get("role", "")
        if role not in Membership.Role.values:
            messages.error(request, "Choose a role.")
        elif self.last_admin(tenant, membership) and role != Membership.Role.ADMIN:
            messages.error(request, f"{membership.user} is the last admin of {tenant.slug}: add another admin first.")
        else:
            changes.change_role(membership, role)
            messages.success(request, f"{membership.user} is now {role} of {tenant.slug}.")
        return self.back(tenant)

    def remove(self, request: HttpRequest, tenant: Tenant, membership: Membership) -> HttpResponse:
        if self.last_admin(tenant, membership):
            messages.error(request, f"{membership.user} is the last admin of {tenant.slug}: add another admin first.")
            return self.back(tenant)
        kept = changes.keys_made_by(membership).count()
        revoked = changes.remove_member(membership, revoke_keys=request.POST.get("revoke_keys") == "on")
        gone = f"{membership.user} no longer belongs to {tenant.slug}"
        if revoked:
            messages.success(request, f"{gone}; the {len(revoked)} API key(s) they made are revoked.")
        elif kept:
            messages.warning(
                request,
                f"{gone}, but the {kept} API key(s) they made for {tenant.slug} still work: "
                "revoke them on the API keys page if they should stop.",
            )
        else:
            messages.success(request, f"{gone}.")
        return self.back(tenant)

    @staticmethod
    def last_admin(tenant: Tenant, membership: Membership) -> bool:
        """Whether this member is the tenant's only admin (a tenant keeps at least one)."""
        if membership.role != Membership.Role.ADMIN:
            return False
        return not tenant.memberships.filter(role=Membership.Role.ADMIN).exclude(pk=membership.pk).exists()


# ---------------------------------------------------------------------------- API keys


class ApiKeyListView(AdminPageMixin, View):
    """API keys of the administered tenants: create one (shown once), revoke one."""

    template_name = "tenancy/apikey_list.html"

    def keys(self) -> QuerySet[ApiKey]:
        creator_left = ~Exists(Membership.objects.filter(user=OuterRef("created_by"), tenant=OuterRef("tenant")))
        keys = (
            ApiKey.objects.select_related("tenant", "created_by")
            .annotate(creator_left=creator_left & Q(created_by__isnull=False, tenant__isnull=False))
            .order_by("-created_at", "-pk")
        )
        if self.request.user.is_superuser:
            return keys
        return keys.filter(tenant__in=[t.pk for t in self.tenants])

    def get(
        self,
        request: HttpRequest,
        form: dict[str, Any] | None = None,
        status: int = 200,
        issued: tuple[ApiKey, str] | None = None,
    ) -> HttpResponse:
        request.session.pop(NEW_KEY_SESSION, None)  # where a secret waited before: forget it
        context = {
            "keys": self.keys()[:200],
            "tenants": self.tenants,
            "scopes": SCOPES,
            "form": form or {"scopes": ["read"], "tenant": self.tenants[0].slug if self.tenants else ""},
            "secret": issued[1] if issued else "",
            "issued": issued[0] if issued else None,
            "form_token": secrets.token_urlsafe(16),
            "can_create_unbound": request.user.is_superuser,
            "default_runtime_rate": settings.KINDGI_RUNTIME_RATE,
        }
        response = render(request, self.template_name, context, status=status)
        if issued:
            response["Cache-Control"] = "no-store"
        return response

    def post(self, request: HttpRequest) -> HttpResponse:
        if request.POST.get("action") == "revoke":
            return self.revoke(request)
        if request.POST.get("action") == "runtime-rate":
            return self.set_rate(request)
        return self.create(request)

    def create(self, request: HttpRequest) -> HttpResponse:
        scopes = request.POST.getlist("scopes")
        slug = request.POST.get("tenant", "")
        name = request.POST.get("name", "").strip()
        rate = request.POST.get("runtime_rate", "").strip()
        form: dict[str, Any] = {"scopes": scopes, "tenant": slug, "name": name, "runtime_rate": rate, "errors": {}}
        try:
            rate = changes.clean_runtime_rate(rate)
        except ValidationError as invalid:
            form["errors"]["runtime_rate"] = " ".join(invalid.messages)
        if not scopes or any(scope not in SCOPES for scope in scopes):
            form["errors"]["scopes"] = "Choose at least one scope."
        tenant = next((t for t in self.tenants if t.slug == slug), None)
        if tenant is None and not (slug == "" and request.user.is_superuser):
            form["errors"]["tenant"] = "Choose a tenant you administer."
        if form["errors"]:
            return self.get(request, form, status=400)
        if not self.use_form_token(request):
            messages.info(request, "That form already made its key, whose secret was shown once.")
            return HttpResponseRedirect(reverse("apikey-list"))
        key, secret = changes.issue_key(
            scopes=scopes, tenant=tenant, name=name, created_by=request.user, runtime_rate=rate
        )
        # The secret is shown in this answer only: it is never stored, in the database, the
        # session or a message, so nothing holds it once the page is closed.
        return self.get(request, issued=(key, secret))

    @staticmethod
    def use_form_token(request: HttpRequest) -> bool:
        """Whether the form's one-time token is fresh, and spend it: reloading the answer
        posts the form again, and that must not make a second key."""
        token = request.POST.get("form_token", "")
        used: list[str] = request.session.get(USED_FORM_TOKENS, [])
        if token and token in used:
            return False
        if token:
            request.session[USED_FORM_TOKENS] = [*used, token][-USED_FORM_TOKENS_KEPT:]
        return True

    def set_rate(self, request: HttpRequest) -> HttpResponse:
        """A key's own limit on the runtime path, changed without issuing a new key."""
        key = self.keys().filter(pk=request.POST.get("key") or 0).first()
        if key is None:
            raise Http404("no such key")
        try:
            rate = changes.clean_runtime_rate(request.POST.get("runtime_rate", ""))
        except ValidationError as invalid:
            messages.error(request, f"Key {key.prefix}…: runtime rate not changed: {' '.join(invalid.messages)}")
            return HttpResponseRedirect(reverse("apikey-list"))
        if changes.set_runtime_rate(key, rate):
            limit = rate or f"the console's default ({settings.KINDGI_RUNTIME_RATE})"
            messages.success(request, f"Key {key.prefix}… is limited to {limit} on evaluate and ingestion.")
        return HttpResponseRedirect(reverse("apikey-list"))

    def revoke(self, request: HttpRequest) -> HttpResponse:
        key = self.keys().filter(pk=request.POST.get("key") or 0).first()
        if key is None:
            raise Http404("no such key")
        if not key.revoked:
            changes.revoke_key(key)
            messages.success(request, f"Key {key.prefix}… is revoked: it no longer authenticates.")
        return HttpResponseRedirect(reverse("apikey-list"))
