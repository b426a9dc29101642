"""The admin pages of tenants, members and API keys."""

from django.contrib.auth import views as auth_views
from django.urls import path

from kindgi_console.tenancy import admin_pages

urlpatterns = [
    path("manage/tenants/", admin_pages.TenantListView.as_view(), name="tenant-list"),
    path("manage/members/", admin_pages.MemberListView.as_view(), name="member-list"),
    path("manage/api-keys/", admin_pages.ApiKeyListView.as_view(), name="apikey-list"),
    # An invitation's link: choose a password (Django's reset token: it works once), then in.
    path(
        "invitation/<uidb64>/<token>/",
        auth_views.PasswordResetConfirmView.as_view(
            template_name="registration/invitation_accept.html", post_reset_login=True, success_url="/"
        ),
        name="invitation-accept",
    ),
]
