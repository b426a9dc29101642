"""The bare project's settings: no app, no middleware, the console's database settings.

The database is the console's own (`DATABASE_URL`, persistent connections for
`DATABASE_CONN_MAX_AGE` seconds as the console keeps them), so that the two differ in
what runs inside Django only.
"""

from __future__ import annotations

import os

import dj_database_url

DEBUG = False
SECRET_KEY = "bench-only-not-secret"
ALLOWED_HOSTS = ["127.0.0.1", "localhost"]
ROOT_URLCONF = "bench.bare.urls"
INSTALLED_APPS: list[str] = []
MIDDLEWARE: list[str] = []
USE_TZ = True
DATABASES = {
    "default": dj_database_url.config(
        env="DATABASE_URL", conn_max_age=int(os.environ.get("DATABASE_CONN_MAX_AGE", "60"))
    )
}
