"""Kindgi Console settings, read from the environment in this one module.

Nothing set: SQLite in the project folder and a broker on the local filesystem, so the
console runs with no service to install. `DATABASE_URL` and `CELERY_BROKER_URL` point it
at PostgreSQL and Redis.
"""

from __future__ import annotations

import contextlib
from pathlib import Path

import dj_database_url

from kindgi_console.env import envbool, envint, envlist, envstr

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(envstr("KINDGI_VAR_DIR", str(BASE_DIR / "var")))

DEBUG = envbool("DJANGO_DEBUG", True)
SECRET_KEY = envstr("DJANGO_SECRET_KEY", "kindgi-local-development-only-not-secret" if DEBUG else "")
if not SECRET_KEY:
    from django.core.exceptions import ImproperlyConfigured

    raise ImproperlyConfigured("DJANGO_SECRET_KEY must be set when DJANGO_DEBUG is false")
ALLOWED_HOSTS = envlist("DJANGO_ALLOWED_HOSTS", ["localhost", "127.0.0.1", "[::1]", "testserver"])
CSRF_TRUSTED_ORIGINS = envlist("DJANGO_CSRF_TRUSTED_ORIGINS", [])

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django.contrib.humanize",
    "rest_framework",
    "django_filters",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "kindgi_console",
    "kindgi_console.tenancy",
    "kindgi_console.audit",
    "guardrails",
    "traces",
    "alerts",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "kindgi_console.audit.log.AuditActorMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "csp.middleware.CSPMiddleware",
]

ROOT_URLCONF = "kindgi_console.urls"
WSGI_APPLICATION = "kindgi_console.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "kindgi_console.tenancy.views.console_context",
            ],
        },
    },
]

DATABASES = {
    "default": dj_database_url.config(
        env="DATABASE_URL",
        default=f"sqlite:///{BASE_DIR / 'db.sqlite3'}",
        conn_max_age=envint("DATABASE_CONN_MAX_AGE", 60, minimum=0),
    )
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # WAL lets the web process read while the worker writes.
    DATABASES["default"]["OPTIONS"] = {
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
        "transaction_mode": "IMMEDIATE",
        "timeout": 20,
    }
    # The test database is a file, so that a real Celery worker process can open it.
    DATABASES["default"]["TEST"] = {"NAME": str(VAR_DIR / "test-db.sqlite3")}
    VAR_DIR.mkdir(parents=True, exist_ok=True)
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "/"
LOGOUT_REDIRECT_URL = "login"

# The ledger's covering index (INCLUDE columns) is a PostgreSQL feature; SQLite builds it
# without them, which is what is wanted there.
SILENCED_SYSTEM_CHECKS = ["models.W040"]

LANGUAGE_CODE = "en"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

STATIC_URL = "/static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = VAR_DIR / "staticfiles"
# WhiteNoise serves the committed assets straight from static/ (no collectstatic step needed);
# a deployment may still collect them to STATIC_ROOT behind a CDN-less proxy.
WHITENOISE_USE_FINDERS = True
with contextlib.suppress(OSError):  # a read-only deployment collects its assets beforehand
    STATIC_ROOT.mkdir(parents=True, exist_ok=True)
MEDIA_ROOT = VAR_DIR / "media"
FILE_UPLOAD_MAX_MEMORY_SIZE = 2 * 1024 * 1024  # larger uploads stream to a temporary file
DATA_UPLOAD_MAX_MEMORY_SIZE = envint("KINDGI_MAX_REQUEST_BYTES", 10 * 1024 * 1024, minimum=1024)

# Security: production settings come from DJANGO_DEBUG=false.
SESSION_COOKIE_HTTPONLY = True
CSRF_COOKIE_HTTPONLY = False
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
X_FRAME_OPTIONS = "DENY"
if not DEBUG:
    SECURE_SSL_REDIRECT = envbool("DJANGO_SECURE_SSL_REDIRECT", True)
    SESSION_COOKIE_SECURE = True
    CSRF_COOKIE_SECURE = True
    SECURE_HSTS_SECONDS = envint("DJANGO_HSTS_SECONDS", 31536000, minimum=0)
    SECURE_HSTS_INCLUDE_SUBDOMAINS = True
    SECURE_HSTS_PRELOAD = True
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")

CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": ["'self'"],
        "script-src": ["'self'"],
        "style-src": ["'self'"],
        "img-src": ["'self'", "data:"],
        "connect-src": ["'self'"],
        "font-src": ["'self'"],
        "object-src": ["'none'"],
        "base-uri": ["'none'"],
        "frame-ancestors": ["'none'"],
        "form-action": ["'self'"],
    }
}

REST_FRAMEWORK = {
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    "DEFAULT_PARSER_CLASSES": ["rest_framework.parsers.JSONParser"],
    "UNAUTHENTICATED_USER": "django.contrib.auth.models.AnonymousUser",
    "EXCEPTION_HANDLER": "kindgi_console.api.exception_handler",
    "DEFAULT_FILTER_BACKENDS": ["django_filters.rest_framework.DjangoFilterBackend"],
}
# Requests per API key or user (DRF's rate syntax: "N/second|minute|hour|day").
KINDGI_API_RATE = envstr("KINDGI_API_RATE", "3000/minute")
SPECTACULAR_SETTINGS = {
    "TITLE": "Kindgi Console API",
    "DESCRIPTION": (
        "Ingest run traces, get runtime verdicts, author guardrails, "
        "read violations and the judge cost ledger."
    ),
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "OAS_VERSION": "3.1.0",
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "kindgi_console.openapi.add_wire_schemas",
        "kindgi_console.openapi.refuse_nul_in_text_parameters",
    ],
}

# Celery: Redis in a deployment; a broker on the local filesystem when nothing is set.
CELERY_BROKER_URL = envstr("CELERY_BROKER_URL", "filesystem://")
if CELERY_BROKER_URL == "filesystem://":
    _broker_dir = VAR_DIR / "broker"
    CELERY_BROKER_TRANSPORT_OPTIONS: dict[str, object] = {
        "data_folder_in": str(_broker_dir / "queue"),
        "data_folder_out": str(_broker_dir / "queue"),
        "processed_folder": str(_broker_dir / "processed"),
        "control_folder": str(_broker_dir / "control"),
        "store_processed": False,
        # How often an idle worker looks at the folder for a new message (seconds).
        "polling_interval": envint("KINDGI_BROKER_POLL_MS", 200, minimum=10) / 1000,
    }
    # Made here, where the broker is chosen: any process that sends a task (runserver,
    # gunicorn, a worker, a management command) finds them.
    with contextlib.suppress(OSError):
        for _folder in ("queue", "processed", "control"):
            (_broker_dir / _folder).mkdir(parents=True, exist_ok=True)
else:
    # Redis hands an unacknowledged message (its worker was lost) to another worker after
    # this many seconds; make it longer than the longest task.
    CELERY_BROKER_TRANSPORT_OPTIONS = {"visibility_timeout": envint("CELERY_VISIBILITY_TIMEOUT", 600, minimum=1)}
CELERY_TASK_ALWAYS_EAGER = envbool("CELERY_TASK_ALWAYS_EAGER", False)
CELERY_TASK_EAGER_PROPAGATES = True
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_TIME_LIMIT = envint("CELERY_TASK_TIME_LIMIT", 300, minimum=1)
CELERY_TASK_SOFT_TIME_LIMIT = envint("CELERY_TASK_SOFT_TIME_LIMIT", 270, minimum=1)
CELERY_RESULT_BACKEND = None
CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_DEFAULT_QUEUE = "kindgi"
CELERY_WORKER_HIJACK_ROOT_LOGGER = False
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_BEAT_SCHEDULE_FILENAME = str(VAR_DIR / "celerybeat-schedule")

# Evaluation runs: traces per chunk (one task each), and how long a chunk's claim (or its
# message) is trusted before the chunk is sent again. A working chunk renews its lease
# after every batch of KINDGI_EVALUATION_BATCH traces, so the lease only has to outlast one
# batch; the periodic check looks for expired leases every KINDGI_CHUNK_CHECK_SECONDS.
KINDGI_EVALUATION_CHUNK_SIZE = envint("KINDGI_EVALUATION_CHUNK_SIZE", 500, minimum=1)
KINDGI_EVALUATION_BATCH = envint("KINDGI_EVALUATION_BATCH", 100, minimum=1)
KINDGI_CHUNK_LEASE_SECONDS = envint("KINDGI_CHUNK_LEASE_SECONDS", 300, minimum=1)
KINDGI_CHUNK_MAX_ATTEMPTS = envint("KINDGI_CHUNK_MAX_ATTEMPTS", 5, minimum=1)
KINDGI_CHUNK_CHECK_SECONDS = envint("KINDGI_CHUNK_CHECK_SECONDS", 60, minimum=1)
# Each worker writes a heartbeat row this often; pages of waiting work say when no worker
# has been seen for three of them.
KINDGI_WORKER_HEARTBEAT_SECONDS = envint("KINDGI_WORKER_HEARTBEAT_SECONDS", 10, minimum=1)
# OTLP ingestion (docs/otlp.md): how long an agent turn whose agent span has not arrived is
# kept before what arrived is stored as an incomplete trace; how many such spans a tenant may
# have waiting; the span attribute that names the flow; the resource attribute that names the
# tenant for a key of the whole console.
KINDGI_OTLP_TURN_TIMEOUT_S = envint("KINDGI_OTLP_TURN_TIMEOUT_S", 60, minimum=1)
KINDGI_OTLP_MAX_PENDING_SPANS = envint("KINDGI_OTLP_MAX_PENDING_SPANS", 10000, minimum=1)
KINDGI_OTLP_FLOW_ATTRIBUTE = envstr("KINDGI_OTLP_FLOW_ATTRIBUTE", "kindgi.flow")
KINDGI_OTLP_TENANT_ATTRIBUTE = envstr("KINDGI_OTLP_TENANT_ATTRIBUTE", "kindgi.tenant")
CELERY_BEAT_SCHEDULE = {
    "requeue-expired-chunks": {
        "task": "traces.tasks.requeue_expired_work",
        "schedule": float(KINDGI_CHUNK_CHECK_SECONDS),
    },
    "complete-otlp-turns": {
        "task": "traces.tasks.complete_waiting_otlp_turns",
        "schedule": float(max(1, KINDGI_OTLP_TURN_TIMEOUT_S // 2)),
    },
    "alerts-tick": {
        "task": "alerts.tasks.tick",
        "schedule": float(envint("KINDGI_ALERT_CHECK_SECONDS", 60, minimum=1)),
    },
}

# Alerts: one attempt's total deadline, the backoff between attempts (base x 2^n, capped),
# how many attempts a delivery gets before it is failed for good.
KINDGI_ALERT_SEND_TIMEOUT_S = envint("KINDGI_ALERT_SEND_TIMEOUT_S", 10, minimum=1)
KINDGI_ALERT_RETRY_BASE_S = envint("KINDGI_ALERT_RETRY_BASE_S", 30, minimum=1)
KINDGI_ALERT_RETRY_MAX_S = envint("KINDGI_ALERT_RETRY_MAX_S", 3600, minimum=1)
KINDGI_ALERT_MAX_ATTEMPTS = envint("KINDGI_ALERT_MAX_ATTEMPTS", 8, minimum=1)
# Whether webhooks may go to loopback and private addresses (only with DEBUG, by default).
KINDGI_ALERT_PRIVATE_URLS = envbool("KINDGI_ALERT_PRIVATE_URLS", DEBUG)
# E-mail (alert channels): SMTP when EMAIL_HOST is set, else printed by the console backend.
EMAIL_HOST = envstr("EMAIL_HOST", "")
EMAIL_PORT = envint("EMAIL_PORT", 587, minimum=1)
EMAIL_HOST_USER = envstr("EMAIL_HOST_USER", "")
EMAIL_HOST_PASSWORD = envstr("EMAIL_HOST_PASSWORD", "")
EMAIL_USE_TLS = envbool("EMAIL_USE_TLS", True)
EMAIL_TIMEOUT = envint("EMAIL_TIMEOUT", 10, minimum=1)
DEFAULT_FROM_EMAIL = envstr("DEFAULT_FROM_EMAIL", "kindgi@localhost")
EMAIL_BACKEND = (
    "django.core.mail.backends.smtp.EmailBackend" if EMAIL_HOST else "django.core.mail.backends.console.EmailBackend"
)

# Uploads: traces stored per batch, and how many bad lines an upload keeps (all are counted).
KINDGI_UPLOAD_BATCH = envint("KINDGI_UPLOAD_BATCH", 500, minimum=1)
KINDGI_UPLOAD_MAX_ERRORS = envint("KINDGI_UPLOAD_MAX_ERRORS", 1000, minimum=1)
# An upload is read in pieces, one task each, well under the task time limit: a piece ends
# after this many traces or seconds (at the end of a batch), and the next task goes on.
KINDGI_UPLOAD_PIECE_LINES = envint("KINDGI_UPLOAD_PIECE_LINES", 50_000, minimum=1)
KINDGI_UPLOAD_PIECE_SECONDS = envint(
    "KINDGI_UPLOAD_PIECE_SECONDS", max(1, min(60, CELERY_TASK_SOFT_TIME_LIMIT // 4)), minimum=0)
# What an uploaded file may expand to once decompressed, and how many blank lines in a row
# it may hold, before it is refused (a few KB of gzip can hold GBs).
KINDGI_UPLOAD_MAX_BYTES_DECOMPRESSED = envint(
    "KINDGI_UPLOAD_MAX_BYTES_DECOMPRESSED", 4 * 1024**3, minimum=1024)
KINDGI_UPLOAD_MAX_BLANK_LINES = envint("KINDGI_UPLOAD_MAX_BLANK_LINES", 10_000, minimum=1)

# Ingestion limits (runtrace.md), each one a setting.
KINDGI_MAX_TRACE_BYTES = envint("KINDGI_MAX_TRACE_BYTES", 1024 * 1024, minimum=1024)
KINDGI_MAX_REQUEST_BYTES = DATA_UPLOAD_MAX_MEMORY_SIZE
KINDGI_MAX_BATCH = envint("KINDGI_MAX_BATCH", 1000, minimum=1)
KINDGI_MAX_DEPTH = envint("KINDGI_MAX_DEPTH", 64, minimum=2)

# Production refuses `filesystem` code artifacts (the seed: production servers SHOULD reject them).
KINDGI_PRODUCTION = envbool("KINDGI_PRODUCTION", not DEBUG)
# Check packs: Python modules that define checks with the engine's define_check.
KINDGI_CHECK_PACKS = envlist("KINDGI_CHECK_PACKS", [])
# The sandbox of pack checks: limits for guardrails that declare none, warm workers per posture.
KINDGI_SANDBOX_MEM_MB = envint("KINDGI_SANDBOX_MEM_MB", 256, minimum=16)
KINDGI_SANDBOX_CPU_MS = envint("KINDGI_SANDBOX_CPU_MS", 1000, minimum=10)
KINDGI_SANDBOX_POOL_SIZE = envint("KINDGI_SANDBOX_POOL_SIZE", 2, minimum=1)
# What a guardrail's needsSpec may ask for: capabilities and bindings the deployment provides,
# and the names of environment variables that hold secrets (never stored in the database).
KINDGI_CAPABILITIES = envlist("KINDGI_CAPABILITIES", [])
KINDGI_BINDINGS = envlist("KINDGI_BINDINGS", [])
KINDGI_SECRETS = envlist("KINDGI_SECRETS", [])
# The plain environment variables a check's needsSpec.env may name (nothing else is handed
# over; the console's own variables never are, whichever list names them).
KINDGI_PACK_ENV = envlist("KINDGI_PACK_ENV", [])
# The llm-judge: how long a synchronous evaluation (POST evaluate, ingestion) may take in all,
# and one judge call at most, retries included. Batch runs have the task's soft time limit.
KINDGI_EVALUATE_TIME_LIMIT_S = envint("KINDGI_EVALUATE_TIME_LIMIT_S", 30, minimum=1)
KINDGI_JUDGE_CALL_LIMIT_S = envint("KINDGI_JUDGE_CALL_LIMIT_S", 60, minimum=1)

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": envstr("KINDGI_LOG_LEVEL", "INFO")},
}
