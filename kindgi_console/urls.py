"""Top-level URL routes."""

from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import URLPattern, URLResolver, include, path, re_path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView

from kindgi_console.api import json_not_found
from kindgi_console.audit.api import AuditListView
from kindgi_console.overview import OverviewView
from kindgi_console.tenancy.signin import SignInView, ThrottledAdminAuthenticationForm, admin_sign_in
from kindgi_console.tenancy.sso import SSOCallbackView, SSOStartView
from kindgi_console.tenancy.views import switch_tenant
from traces import urls as trace_routes

api_v1: list[URLPattern | URLResolver] = [
    path("", include(trace_routes.api_urlpatterns)),  # guardrails' and traces' routes, ordered there
    path("", include("alerts.api.urls")),
    path("audit", AuditListView.as_view(), name="api-audit"),
    re_path(r"", json_not_found),  # an unknown API URL is a 404 in the API's error shape
]

admin.site.login_form = ThrottledAdminAuthenticationForm

urlpatterns = [
    # The API first: a runtime calls it before every agent turn, and resolving its URLs
    # then tries no page route (no page route is under api/).
    path("api/v1/", include(api_v1)),
    path("", OverviewView.as_view(), name="dashboard"),
    path("", include("kindgi_console.tenancy.urls")),
    path("", include("kindgi_console.audit.urls")),
    path("", include("alerts.urls")),
    path("admin/login/", admin_sign_in),  # before the admin's own: refused when passwords are off
    path("admin/", admin.site.urls),
    path("login/", SignInView.as_view(), name="login"),
    path("oidc/authenticate/", SSOStartView.as_view(), name="oidc_authentication_init"),
    path("oidc/callback/", SSOCallbackView.as_view(), name="oidc_authentication_callback"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("switch-tenant/", switch_tenant, name="switch-tenant"),
    path("api/schema/", SpectacularAPIView.as_view(), name="api-schema"),
    path("api/docs/", SpectacularSwaggerSplitView.as_view(url_name="api-schema"), name="api-docs"),
    path("", include(trace_routes.urlpatterns)),  # guardrails' and traces' pages, ordered there
    re_path(r"^api/", json_not_found),  # an unknown /api/ URL outside v1 too
]

handler400 = "kindgi_console.errors.bad_request"
handler500 = "kindgi_console.errors.server_error"
