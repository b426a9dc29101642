"""The admin pages of tenants, members and API keys."""

from django.urls import path

from kindgi_console.tenancy import admin_pages

urlpatterns = [
    path("manage/tenants/", admin_pages.TenantListView.as_view(), name="tenant-list"),
    path("manage/members/", admin_pages.MemberListView.as_view(), name="member-list"),
    path("manage/api-keys/", admin_pages.ApiKeyListView.as_view(), name="apikey-list"),
]
