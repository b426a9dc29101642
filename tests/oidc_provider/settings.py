"""A minimal OpenID provider for the single sign-on tests: django-oauth-toolkit with OIDC on.

Started by tests/oidc_provider/server.py as a process of its own, with its own SQLite
database, RSA key and port (all from the environment), never by the console.
"""

from __future__ import annotations

import os

SECRET_KEY = "oidc-provider-for-tests-only"
DEBUG = False
ALLOWED_HOSTS = ["*"]
INSTALLED_APPS = [
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "oauth2_provider",
    "tests.oidc_provider",
]
MIDDLEWARE = [
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
]
ROOT_URLCONF = "tests.oidc_provider.urls"
TEMPLATES = [{"BACKEND": "django.template.backends.django.DjangoTemplates", "APP_DIRS": True, "OPTIONS": {}}]
DATABASES = {"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": os.environ["OIDC_PROVIDER_DB"]}}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
USE_TZ = True
LOGIN_URL = "/accounts/login/"
# Its own cookies: the console runs on the same machine.
SESSION_COOKIE_NAME = "provider_session"
CSRF_COOKIE_NAME = "provider_csrftoken"
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]  # fast: a test provider
# What the token endpoint does to the ID tokens it hands out: OIDC_PROVIDER_TAMPER_FILE (views.py).
OIDC_RSA_PRIVATE_KEY = os.environ["OIDC_PROVIDER_KEY"]
OAUTH2_PROVIDER = {
    "OIDC_ENABLED": True,
    "OIDC_RSA_PRIVATE_KEY": OIDC_RSA_PRIVATE_KEY,
    "PKCE_REQUIRED": True,
    "SCOPES": {"openid": "OpenID", "email": "e-mail", "profile": "profile", "groups": "groups"},
    "OAUTH2_VALIDATOR_CLASS": "tests.oidc_provider.views.GroupsValidator",
    "ALLOWED_REDIRECT_URI_SCHEMES": ["http", "https"],
}
LOGGING = {"version": 1, "root": {"level": "WARNING"}}
