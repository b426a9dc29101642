"""Kindgi Console settings, read from the environment in this one module.

Every variable is declared once, with its type, default and meaning, in kindgi_console/env.py
(docs/settings.md is generated from it).

Nothing set: SQLite in the project folder and a broker on the local filesystem, so the
console runs with no service to install. `DATABASE_URL` and `CELERY_BROKER_URL` point it
at PostgreSQL and Redis.
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import socket
from pathlib import Path

import dj_database_url
import django_stubs_ext
from csp.constants import NONCE

from kindgi_console.env import flag, items, text, whole
from kindgi_console.tenancy.sso_groups import parse_groups

# Generic Django classes (ModelAdmin[Model], QuerySet[Model]...) subscriptable at run time,
# as their type annotations write them.
django_stubs_ext.monkeypatch()

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(text("KINDGI_VAR_DIR", str(BASE_DIR / "var")))
# Consoles that share one Redis keep their queues and cache keys apart (so do test processes).
KINDGI_PREFIX = text("KINDGI_PREFIX")

DEBUG = flag("DJANGO_DEBUG")
SECRET_KEY = text("DJANGO_SECRET_KEY", "kindgi-local-development-only-not-secret" if DEBUG else "")
if not SECRET_KEY:
    from django.core.exceptions import ImproperlyConfigured

    raise ImproperlyConfigured("DJANGO_SECRET_KEY must be set when DJANGO_DEBUG is false")
ALLOWED_HOSTS = items("DJANGO_ALLOWED_HOSTS")
CSRF_TRUSTED_ORIGINS = items("DJANGO_CSRF_TRUSTED_ORIGINS")

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

# The API's requests skip what only pages need (kindgi_console.middleware): static files, messages.
MIDDLEWARE = [
    "kindgi_console.logs.ObserveRequests",  # first: times and counts every request, whatever answers it
    "kindgi_console.ops.Probes",  # /healthz, /readyz, /healthz/workers, /metrics: before the host check and HTTPS
    "kindgi_console.replicas.ReplicaReads",  # before anything reads: which database this request reads
    "kindgi_console.errors.ApiErrorsMiddleware",
    "kindgi_console.middleware.ApiRequiresHttps",  # before SecurityMiddleware: /api/ never redirects
    "django.middleware.security.SecurityMiddleware",
    "kindgi_console.middleware.StaticFilesForPages",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "kindgi_console.middleware.PrivateAnswers",
    "kindgi_console.audit.log.AuditActorMiddleware",
    "kindgi_console.middleware.MessagesForPages",
    "kindgi_console.middleware.RefuseNulForPages",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "kindgi_console.middleware.ContentSecurityPolicy",  # django-csp's, the API's header built once
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
                "kindgi_console.jobs.template_context",
            ]
        },
    }
]

DATABASES = {
    "default": dj_database_url.config(
        env="DATABASE_URL",  # declared in kindgi_console/env.py; dj-database-url reads it
        default=f"sqlite:///{BASE_DIR / 'db.sqlite3'}",
        conn_max_age=whole("DATABASE_CONN_MAX_AGE"),
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
elif DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql":
    # Only server-bound cursors prepare (`kindgi_console.db.prepared_cursor`); Django's bind on
    # the client. None: nothing is prepared (a pooler in transaction mode cannot keep them).
    DATABASES["default"].setdefault("OPTIONS", {})["prepare_threshold"] = (
        5 if flag("DATABASE_PREPARED_STATEMENTS") else None
    )
# Read replicas (kindgi_console.replicas): aliases replica1, replica2... with the primary's
# options; in tests each mirrors the test database (a test that starts a real replica points
# them at it). Only the primary is migrated.
REPLICA_ALIASES: list[str] = []
for _number, _url in enumerate(items("DATABASE_REPLICA_URLS"), start=1):
    _replica = dj_database_url.parse(_url, conn_max_age=whole("DATABASE_CONN_MAX_AGE"))
    if _replica["ENGINE"] != "django.db.backends.postgresql" or DATABASES["default"]["ENGINE"] != _replica["ENGINE"]:
        from django.core.exceptions import ImproperlyConfigured

        raise ImproperlyConfigured("DATABASE_REPLICA_URLS: read replicas are PostgreSQL streaming from DATABASE_URL")
    _replica["OPTIONS"] = {**DATABASES["default"].get("OPTIONS", {}), **_replica.get("OPTIONS", {})}
    _replica["TEST"] = {"MIRROR": "default"}
    DATABASES[f"replica{_number}"] = _replica
    REPLICA_ALIASES.append(f"replica{_number}")
DATABASE_ROUTERS = ["kindgi_console.replicas.ReplicaRouter"] if REPLICA_ALIASES else []
DATABASE_REPLICA_PIN_S = whole("DATABASE_REPLICA_PIN_S")
DATABASE_REPLICA_MAX_LAG_S = whole("DATABASE_REPLICA_MAX_LAG_S")
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
DATA_UPLOAD_MAX_MEMORY_SIZE = whole("KINDGI_MAX_REQUEST_BYTES")

# Security: production settings come from DJANGO_DEBUG=false.
SESSION_COOKIE_HTTPONLY = True
CSRF_COOKIE_HTTPONLY = False
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
X_FRAME_OPTIONS = "DENY"
if not DEBUG:
    SECURE_SSL_REDIRECT = flag("DJANGO_SECURE_SSL_REDIRECT")
    SESSION_COOKIE_SECURE = True
    CSRF_COOKIE_SECURE = True
    SECURE_HSTS_SECONDS = whole("DJANGO_HSTS_SECONDS")
    SECURE_HSTS_INCLUDE_SUBDOMAINS = True
    SECURE_HSTS_PRELOAD = True
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")

CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": ["'self'"],
        "script-src": ["'self'"],
        # The nonce admits only the <style> elements the JSON editor (CodeMirror) injects;
        # the page passes it to the bundle as data-csp-nonce.
        "style-src": ["'self'", NONCE],
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
    "DEFAULT_PARSER_CLASSES": ["kindgi_console.jsonbody.StrictJSONParser"],
    "UNAUTHENTICATED_USER": "django.contrib.auth.models.AnonymousUser",
    "EXCEPTION_HANDLER": "kindgi_console.api.exception_handler",
    "DEFAULT_FILTER_BACKENDS": ["django_filters.rest_framework.DjangoFilterBackend"],
}
# Requests per API key or user (DRF's rate syntax: "N/second|minute|hour|day").
KINDGI_API_RATE = text("KINDGI_API_RATE")
# The runtime path's own (POST evaluate, ingestion), sized for a fleet; a key may have its own.
KINDGI_RUNTIME_RATE = text("KINDGI_RUNTIME_RATE")
SPECTACULAR_SETTINGS = {
    "TITLE": "Kindgi Console API",
    "DESCRIPTION": (
        "Ingest run traces, get runtime verdicts, author guardrails, read violations and the judge cost ledger."
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
        "kindgi_console.openapi.add_common_error_responses",
    ],
}

# The cache holds the API throttle's and the sign-in limit's counters, so it is shared by
# every process: Redis where the broker is Redis (KINDGI_CACHE_URL, default the broker's
# URL: give it a database of its own), else a table of the database.
_broker = text("CELERY_BROKER_URL")
if _broker.startswith(("redis://", "rediss://")):
    CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": text("KINDGI_CACHE_URL") or _broker,
            "KEY_PREFIX": KINDGI_PREFIX,
            # a Redis that is down answers at once rather than hold requests
            "OPTIONS": {"socket_connect_timeout": 1, "socket_timeout": 1},
        }
    }
else:
    CACHES = {"default": {"BACKEND": "django.core.cache.backends.db.DatabaseCache", "LOCATION": "kindgi_cache"}}
# Failed sign-ins allowed per username and address in the window (ten times as many per address).
KINDGI_SIGNIN_FAILURES = whole("KINDGI_SIGNIN_FAILURES")
KINDGI_SIGNIN_WINDOW_S = whole("KINDGI_SIGNIN_WINDOW_S")
# The proxies whose X-Forwarded-For names the client (addresses or networks); none: the
# header is ignored and the client is the peer (kindgi_console.proxies).
KINDGI_TRUSTED_PROXIES = items("KINDGI_TRUSTED_PROXIES")
for _proxy in KINDGI_TRUSTED_PROXIES:
    try:
        ipaddress.ip_network(_proxy, strict=False)
    except ValueError as _error:
        from django.core.exceptions import ImproperlyConfigured

        raise ImproperlyConfigured(f"KINDGI_TRUSTED_PROXIES: {_error}") from None

# The most rows a page's count reads (kindgi_console.paging.bounded_count): past it, "10,000+".
KINDGI_PAGE_COUNT_CAP = whole("KINDGI_PAGE_COUNT_CAP")

# /metrics (kindgi_console.ops): readable from these networks without a key. Every process of
# this machine writes its counts to files in PROMETHEUS_MULTIPROC_DIR (prometheus-client's
# multi-process mode; set before prometheus_client is imported), one folder per host so
# that machines sharing KINDGI_VAR_DIR never write one another's files.
KINDGI_METRICS_ALLOWED_NETWORKS = items("KINDGI_METRICS_ALLOWED_NETWORKS")
for _network in KINDGI_METRICS_ALLOWED_NETWORKS:
    try:
        ipaddress.ip_network(_network, strict=False)
    except ValueError as _error:
        from django.core.exceptions import ImproperlyConfigured

        raise ImproperlyConfigured(f"KINDGI_METRICS_ALLOWED_NETWORKS: {_error}") from None
KINDGI_METRICS_DIR = VAR_DIR / "metrics" / socket.gethostname()
os.environ["PROMETHEUS_MULTIPROC_DIR"] = str(KINDGI_METRICS_DIR)
with contextlib.suppress(OSError):
    KINDGI_METRICS_DIR.mkdir(parents=True, exist_ok=True)
# Single sign-on with OpenID Connect (kindgi_console.tenancy.sso, mozilla-django-oidc): on when
# an issuer and a client id are set. The groups claim grants tenants and roles through
# KINDGI_OIDC_GROUPS; KINDGI_PASSWORD_SIGNIN=false leaves single sign-on the only way in.
KINDGI_OIDC_ISSUER = text("KINDGI_OIDC_ISSUER").rstrip("/")
KINDGI_OIDC_CLIENT_ID = text("KINDGI_OIDC_CLIENT_ID")
KINDGI_OIDC_PROVIDER_NAME = text("KINDGI_OIDC_PROVIDER_NAME")
KINDGI_OIDC_GROUPS_CLAIM = text("KINDGI_OIDC_GROUPS_CLAIM")
KINDGI_OIDC_GROUPS = parse_groups(text("KINDGI_OIDC_GROUPS"))
KINDGI_OIDC_USERNAME_CLAIM = text("KINDGI_OIDC_USERNAME_CLAIM")
KINDGI_OIDC_ENDPOINTS = {
    "authorization_endpoint": text("KINDGI_OIDC_AUTHORIZATION_ENDPOINT"),
    "token_endpoint": text("KINDGI_OIDC_TOKEN_ENDPOINT"),
    "userinfo_endpoint": text("KINDGI_OIDC_USERINFO_ENDPOINT"),
    "jwks_uri": text("KINDGI_OIDC_JWKS_URI"),
}
KINDGI_PASSWORD_SIGNIN = flag("KINDGI_PASSWORD_SIGNIN")
# What mozilla-django-oidc reads; the endpoints come from discovery (tenancy.sso.endpoint).
OIDC_RP_CLIENT_ID = KINDGI_OIDC_CLIENT_ID
OIDC_RP_CLIENT_SECRET = text("KINDGI_OIDC_CLIENT_SECRET")
OIDC_RP_SCOPES = text("KINDGI_OIDC_SCOPES")
OIDC_RP_SIGN_ALGO = text("KINDGI_OIDC_SIGN_ALGO")
OIDC_TIMEOUT = whole("KINDGI_OIDC_TIMEOUT_S")
OIDC_USE_PKCE = True
OIDC_REDIRECT_FIELD_NAME = "next"
LOGIN_REDIRECT_URL_FAILURE = "/login/"
if bool(KINDGI_OIDC_ISSUER) != bool(KINDGI_OIDC_CLIENT_ID):
    from django.core.exceptions import ImproperlyConfigured

    raise ImproperlyConfigured("KINDGI_OIDC_ISSUER and KINDGI_OIDC_CLIENT_ID are set together (single sign-on)")
if not KINDGI_PASSWORD_SIGNIN and not KINDGI_OIDC_CLIENT_ID:
    from django.core.exceptions import ImproperlyConfigured

    raise ImproperlyConfigured("KINDGI_PASSWORD_SIGNIN=false needs single sign-on (KINDGI_OIDC_ISSUER, ...)")
# Passwords sign in through ModelBackend only while they are allowed: turned off, the sessions
# they opened end too (Django drops a session whose backend is no longer listed).
AUTHENTICATION_BACKENDS = [
    *(["kindgi_console.tenancy.sso.SSOBackend"] if KINDGI_OIDC_CLIENT_ID else []),
    *(["django.contrib.auth.backends.ModelBackend"] if KINDGI_PASSWORD_SIGNIN else []),
]

# Celery: Redis in a deployment; a broker on the local filesystem when nothing is set.
CELERY_BROKER_URL = text("CELERY_BROKER_URL")
if CELERY_BROKER_URL == "filesystem://":
    from kombu.transport import TRANSPORT_ALIASES

    # kombu's filesystem transport, leaving no half-written file on a full disk.
    TRANSPORT_ALIASES["filesystem"] = "kindgi_console.filesystem_broker:Transport"
    _broker_dir = VAR_DIR / "broker"
    CELERY_BROKER_TRANSPORT_OPTIONS: dict[str, object] = {
        "data_folder_in": str(_broker_dir / "queue"),
        "data_folder_out": str(_broker_dir / "queue"),
        "processed_folder": str(_broker_dir / "processed"),
        "control_folder": str(_broker_dir / "control"),
        "store_processed": False,
        # How often an idle worker looks at the folder for a new message (seconds).
        "polling_interval": whole("KINDGI_BROKER_POLL_MS") / 1000,
    }
    # Made here, where the broker is chosen: any process that sends a task (runserver,
    # gunicorn, a worker, a management command) finds them.
    with contextlib.suppress(OSError):
        for _folder in ("queue", "processed", "control"):
            (_broker_dir / _folder).mkdir(parents=True, exist_ok=True)
else:
    # Redis hands an unacknowledged message (its worker was lost) to another worker after
    # this many seconds; make it longer than the longest task. A Redis that stops answering
    # (not only one that closes its connections) is noticed within seconds.
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "visibility_timeout": whole("CELERY_VISIBILITY_TIMEOUT"),
        "socket_connect_timeout": 3,
        "socket_timeout": 10,
        "socket_keepalive": True,
        "health_check_interval": 10,
    }
CELERY_TASK_ALWAYS_EAGER = flag("CELERY_TASK_ALWAYS_EAGER")
CELERY_TASK_EAGER_PROPAGATES = True
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_TIME_LIMIT = whole("CELERY_TASK_TIME_LIMIT")
CELERY_TASK_SOFT_TIME_LIMIT = whole("CELERY_TASK_SOFT_TIME_LIMIT")
CELERY_RESULT_BACKEND = None
CELERY_TASK_IGNORE_RESULT = True
# Four queues, each served by workers of its own (the README's deployment), so that no kind
# of work waits behind another's backlog: the runtime evaluation of ingested traces; runs
# (chunks, uploads, previews, comparisons); the periodic checks (beat's ticks, and the alert
# evaluations that write paths ask for); alert deliveries, which wait on receivers.
KINDGI_QUEUES = {role: f"{KINDGI_PREFIX}-{role}" for role in ("runtime", "runs", "periodic", "deliveries")}
CELERY_TASK_QUEUES = {name: {"exchange": name, "routing_key": name} for name in KINDGI_QUEUES.values()}
CELERY_TASK_DEFAULT_QUEUE = KINDGI_QUEUES["runs"]
_ROLE_OF_TASK = {
    "traces.tasks.evaluate_ingested": "runtime",
    "traces.tasks.start_evaluation": "runs",
    "traces.tasks.evaluate_chunk": "runs",
    "traces.tasks.process_upload": "runs",
    "traces.tasks.run_preview": "runs",
    "traces.tasks.compare_runs": "runs",
    "traces.tasks.requeue_expired_work": "periodic",
    "traces.tasks.apply_retention": "periodic",
    "traces.tasks.complete_waiting_otlp_turns": "periodic",
    "alerts.tasks.tick": "periodic",
    "alerts.tasks.record_event": "periodic",
    "alerts.tasks.evaluate_precision": "periodic",
    "alerts.tasks.deliver": "deliveries",
}
CELERY_TASK_ROUTES = {task: {"queue": KINDGI_QUEUES[role]} for task, role in _ROLE_OF_TASK.items()}
CELERY_WORKER_HIJACK_ROOT_LOGGER = False
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
# A lost broker: workers and beat try again for ever, every second or two
# (kindgi_console.workers.Consumer), and a worker that is back sends the recovery check.
CELERY_BROKER_CONNECTION_MAX_RETRIES = None
# A broker that refuses a write (a full disk under the filesystem broker, a Redis out of
# memory or unable to persist) is tried again like a lost one, rather than end the worker.
CELERY_BROKER_CHANNEL_ERROR_RETRY = True
CELERY_WORKER_CONSUMER = "kindgi_console.workers:Consumer"
CELERY_BEAT_SCHEDULE_FILENAME = str(VAR_DIR / "celerybeat-schedule")
# Beat keeps its schedule in memory while that file cannot be written (a full disk).
CELERY_BEAT_SCHEDULER = "kindgi_console.beat:Scheduler"

# Evaluation runs: traces per chunk (one task each) and per batch (read and written
# together). A running chunk's claim is trusted for KINDGI_CHUNK_LEASE_SECONDS, renewed by
# a heartbeat every third of it while its worker lives, so a lost worker is noticed in
# seconds; a queued chunk's message for KINDGI_QUEUED_LEASE_SECONDS before it is sent
# again. The periodic check looks for expired leases every KINDGI_CHUNK_CHECK_SECONDS.
KINDGI_EVALUATION_CHUNK_SIZE = whole("KINDGI_EVALUATION_CHUNK_SIZE")
KINDGI_EVALUATION_BATCH = whole("KINDGI_EVALUATION_BATCH")
KINDGI_CHUNK_LEASE_SECONDS = whole("KINDGI_CHUNK_LEASE_SECONDS")
KINDGI_QUEUED_LEASE_SECONDS = whole("KINDGI_QUEUED_LEASE_SECONDS")
KINDGI_CHUNK_MAX_ATTEMPTS = whole("KINDGI_CHUNK_MAX_ATTEMPTS")
KINDGI_CHUNK_CHECK_SECONDS = whole("KINDGI_CHUNK_CHECK_SECONDS")
# A chunk stops after KINDGI_CHUNK_SECONDS (well within the task's soft limit), stores what
# it evaluated and hands the rest back as a new chunk; a run with llm-judge guardrails makes
# KINDGI_JUDGE_CONCURRENCY judge calls at once per chunk, and its chunks are sized by the
# judge's time (the ledger's recent calls, else KINDGI_JUDGE_CALL_ESTIMATE_MS).
KINDGI_CHUNK_SECONDS = whole("KINDGI_CHUNK_SECONDS", max(1, min(120, CELERY_TASK_SOFT_TIME_LIMIT // 2)))
KINDGI_JUDGE_CONCURRENCY = whole("KINDGI_JUDGE_CONCURRENCY")
KINDGI_JUDGE_CALL_ESTIMATE_MS = whole("KINDGI_JUDGE_CALL_ESTIMATE_MS")
# Retention (a tenant's RetentionPolicy): old rows are deleted KINDGI_RETENTION_BATCH traces
# (or ledger entries) per transaction, every KINDGI_RETENTION_CHECK_SECONDS.
KINDGI_RETENTION_BATCH = whole("KINDGI_RETENTION_BATCH")
KINDGI_RETENTION_CHECK_SECONDS = whole("KINDGI_RETENTION_CHECK_SECONDS")
# Each worker writes a heartbeat row this often; pages of waiting work say when no worker
# has been seen for three of them.
KINDGI_WORKER_HEARTBEAT_SECONDS = whole("KINDGI_WORKER_HEARTBEAT_SECONDS")
# OTLP ingestion (docs/otlp.md): how long an agent turn whose agent span has not arrived is
# kept before what arrived is stored as an incomplete trace; how many such spans a tenant may
# have waiting; the span attribute that names the flow; the resource attribute that names the
# tenant for a key of the whole console.
KINDGI_OTLP_TURN_TIMEOUT_S = whole("KINDGI_OTLP_TURN_TIMEOUT_S")
KINDGI_OTLP_MAX_PENDING_SPANS = whole("KINDGI_OTLP_MAX_PENDING_SPANS")
KINDGI_OTLP_FLOW_ATTRIBUTE = text("KINDGI_OTLP_FLOW_ATTRIBUTE")
KINDGI_OTLP_TENANT_ATTRIBUTE = text("KINDGI_OTLP_TENANT_ATTRIBUTE")
KINDGI_ALERT_CHECK_SECONDS = whole("KINDGI_ALERT_CHECK_SECONDS")
# Each periodic check expires when the next one is sent: ticks that waited (no worker of
# the periodic queue, or a busy one) are dropped rather than all run in a row.
CELERY_BEAT_SCHEDULE = {
    name: {"task": task, "schedule": float(every), "options": {"expires": float(every)}}
    for name, task, every in (
        ("requeue-expired-chunks", "traces.tasks.requeue_expired_work", KINDGI_CHUNK_CHECK_SECONDS),
        ("apply-retention", "traces.tasks.apply_retention", KINDGI_RETENTION_CHECK_SECONDS),
        ("complete-otlp-turns", "traces.tasks.complete_waiting_otlp_turns", max(1, KINDGI_OTLP_TURN_TIMEOUT_S // 2)),
        ("alerts-tick", "alerts.tasks.tick", KINDGI_ALERT_CHECK_SECONDS),
    )
}

# Alerts: one attempt's total deadline, the backoff between attempts (base x 2^n, capped),
# how many attempts a delivery gets before it is failed for good.
KINDGI_ALERT_SEND_TIMEOUT_S = whole("KINDGI_ALERT_SEND_TIMEOUT_S")
KINDGI_ALERT_RETRY_BASE_S = whole("KINDGI_ALERT_RETRY_BASE_S")
KINDGI_ALERT_RETRY_MAX_S = whole("KINDGI_ALERT_RETRY_MAX_S")
KINDGI_ALERT_MAX_ATTEMPTS = whole("KINDGI_ALERT_MAX_ATTEMPTS")
# Whether webhooks may go to loopback and private addresses (only with DEBUG, by default).
KINDGI_ALERT_PRIVATE_URLS = flag("KINDGI_ALERT_PRIVATE_URLS", DEBUG)
# E-mail (alert channels, member invitations): SMTP when EMAIL_HOST is set, else printed by the console backend.
EMAIL_HOST = text("EMAIL_HOST")
EMAIL_PORT = whole("EMAIL_PORT")
EMAIL_HOST_USER = text("EMAIL_HOST_USER")
EMAIL_HOST_PASSWORD = text("EMAIL_HOST_PASSWORD")
EMAIL_USE_TLS = flag("EMAIL_USE_TLS")
EMAIL_TIMEOUT = whole("EMAIL_TIMEOUT")
DEFAULT_FROM_EMAIL = text("DEFAULT_FROM_EMAIL")
EMAIL_BACKEND = (
    "django.core.mail.backends.smtp.EmailBackend" if EMAIL_HOST else "django.core.mail.backends.console.EmailBackend"
)

# Uploads: traces stored per batch, and how many bad lines an upload keeps (all are counted).
KINDGI_UPLOAD_BATCH = whole("KINDGI_UPLOAD_BATCH")
KINDGI_UPLOAD_MAX_ERRORS = whole("KINDGI_UPLOAD_MAX_ERRORS")
# An upload is read in pieces, one task each, well under the task time limit: a piece ends
# after this many traces or seconds (at the end of a batch), and the next task goes on.
KINDGI_UPLOAD_PIECE_LINES = whole("KINDGI_UPLOAD_PIECE_LINES")
KINDGI_UPLOAD_PIECE_SECONDS = whole("KINDGI_UPLOAD_PIECE_SECONDS", max(1, min(60, CELERY_TASK_SOFT_TIME_LIMIT // 4)))
# What an uploaded file may expand to once decompressed, and how many blank lines in a row
# it may hold, before it is refused (a few KB of gzip can hold GBs).
KINDGI_UPLOAD_MAX_BYTES_DECOMPRESSED = whole("KINDGI_UPLOAD_MAX_BYTES_DECOMPRESSED")
KINDGI_UPLOAD_MAX_BLANK_LINES = whole("KINDGI_UPLOAD_MAX_BLANK_LINES")

# Ingestion limits (runtrace.md), each one a setting.
KINDGI_MAX_TRACE_BYTES = whole("KINDGI_MAX_TRACE_BYTES")
KINDGI_MAX_REQUEST_BYTES = DATA_UPLOAD_MAX_MEMORY_SIZE
KINDGI_MAX_BATCH = whole("KINDGI_MAX_BATCH")
KINDGI_MAX_DEPTH = whole("KINDGI_MAX_DEPTH")

# Production refuses `filesystem` code artifacts (the seed: production servers SHOULD reject them).
KINDGI_PRODUCTION = flag("KINDGI_PRODUCTION", not DEBUG)
# Outside production, the only folders `filesystem` code artifacts load from (none: they
# are refused). A request never chooses what the server imports.
KINDGI_PACK_DIRS = items("KINDGI_PACK_DIRS")
# Check packs: Python modules that define checks with the engine's define_check.
KINDGI_CHECK_PACKS = items("KINDGI_CHECK_PACKS")
# The sandbox of pack checks: limits for guardrails that declare none, warm workers per posture.
KINDGI_SANDBOX_MEM_MB = whole("KINDGI_SANDBOX_MEM_MB")
KINDGI_SANDBOX_CPU_MS = whole("KINDGI_SANDBOX_CPU_MS")
KINDGI_SANDBOX_POOL_SIZE = whole("KINDGI_SANDBOX_POOL_SIZE")
# What a guardrail's needsSpec may ask for: capabilities and bindings the deployment provides,
# and the names of environment variables that hold secrets (never stored in the database).
KINDGI_CAPABILITIES = items("KINDGI_CAPABILITIES")
KINDGI_BINDINGS = items("KINDGI_BINDINGS")
KINDGI_SECRETS = items("KINDGI_SECRETS")
# The plain environment variables a check's needsSpec.env may name (nothing else is handed
# over; the console's own variables never are, whichever list names them).
KINDGI_PACK_ENV = items("KINDGI_PACK_ENV")
# The llm-judge: how long a synchronous evaluation (POST evaluate, ingestion) may take in all,
# and one judge call at most, retries included. Batch runs have the task's soft time limit.
KINDGI_EVALUATE_TIME_LIMIT_S = whole("KINDGI_EVALUATE_TIME_LIMIT_S")
# A request that takes traces checks its own deadline (kindgi_console/deadline.py): gunicorn's
# --timeout does not stop a gthread worker's busy thread.
KINDGI_REQUEST_TIME_LIMIT_S = whole("KINDGI_REQUEST_TIME_LIMIT_S")
KINDGI_JUDGE_CALL_LIMIT_S = whole("KINDGI_JUDGE_CALL_LIMIT_S")
# A judge provider found down (this many failed attempts in a row within the window) fails
# its calls at once for the cool-down (traces.judge.circuit).
KINDGI_JUDGE_CIRCUIT_FAILURES = whole("KINDGI_JUDGE_CIRCUIT_FAILURES")
KINDGI_JUDGE_CIRCUIT_WINDOW_S = whole("KINDGI_JUDGE_CIRCUIT_WINDOW_S")
KINDGI_JUDGE_CIRCUIT_COOLDOWN_S = whole("KINDGI_JUDGE_CIRCUIT_COOLDOWN_S")
# The demo's own judge provider (traces.demo.judge_endpoint), on by default while debug is.
KINDGI_DEMO_JUDGE = flag("KINDGI_DEMO_JUDGE", DEBUG)

# KINDGI_LOG_FORMAT=json: one JSON object a line, and a line per request and per task
# (kindgi_console.logs); text: the records as they are.
KINDGI_LOG_FORMAT = text("KINDGI_LOG_FORMAT")
if KINDGI_LOG_FORMAT not in ("text", "json"):
    from django.core.exceptions import ImproperlyConfigured

    raise ImproperlyConfigured(f"KINDGI_LOG_FORMAT: {KINDGI_LOG_FORMAT!r} is not text or json")
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"json": {"()": "kindgi_console.log_format.JsonLines"}},
    "handlers": {
        "console": {"class": "logging.StreamHandler", **({"formatter": "json"} if KINDGI_LOG_FORMAT == "json" else {})}
    },
    "root": {"handlers": ["console"], "level": text("KINDGI_LOG_LEVEL")},
}
