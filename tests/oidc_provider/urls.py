from django.contrib.auth import views as auth_views
from django.urls import URLPattern, URLResolver, include, path

from tests.oidc_provider.views import TamperingTokenView

urlpatterns: list[URLPattern | URLResolver] = [
    path("accounts/login/", auth_views.LoginView.as_view()),
    path("o/token/", TamperingTokenView.as_view()),  # before the toolkit's own /o/token/
    path("o/", include("oauth2_provider.urls", namespace="oauth2_provider")),
]
