"""The admin pages of tenants, members and API keys."""

from django.conf import settings
from django.contrib.auth import views as auth_views
from django.urls import path

from kindgi_console.tenancy import admin_pages


class InvitationAcceptView(auth_views.PasswordResetConfirmView):
    """The chosen password signs the person in, while passwords sign in (`KINDGI_PASSWORD_SIGNIN`)."""

    post_reset_login_backend = "django.contrib.auth.backends.ModelBackend"

    @property
    def post_reset_login(self) -> bool:  # type: ignore[override]
        return bool(settings.KINDGI_PASSWORD_SIGNIN)


urlpatterns = [
    path("manage/tenants/", admin_pages.TenantListView.as_view(), name="tenant-list"),
    path("manage/members/", admin_pages.MemberListView.as_view(), name="member-list"),
    path("manage/api-keys/", admin_pages.ApiKeyListView.as_view(), name="apikey-list"),
    # An invitation's link: choose a password (Django's reset token: it works once), then in.
    path(
        "invitation/<uidb64>/<token>/",
        InvitationAcceptView.as_view(template_name="registration/invitation_accept.html", success_url="/"),
        name="invitation-accept",
    ),
]
