"""Every environment variable the console reads, declared once (name, type, default,
meaning), and the readers settings.py reads them through.

The variables the engine's CI command shares with the console are declared in the engine
(guardrails/engine/environment.py) and taken from there; the console's own are declared
here. docs/settings.md is generated from this declaration (`manage.py settings_doc`; a test
fails when the committed file differs). Adding a setting is one `Variable(...)` entry here,
one read in settings.py and `manage.py settings_doc`. A bad value stops start-up with
ImproperlyConfigured naming the variable, instead of silently using a default.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import ParamSpec, TypeVar

from django.core.exceptions import ImproperlyConfigured

from guardrails.engine.environment import ENGINE, MIB, BadValue, Declaration, Variable

P = ParamSpec("P")
T = TypeVar("T")
V = Variable

#: The declaration by section, in the order docs/settings.md gives them.
SECTIONS: dict[str, tuple[Variable, ...]] = {
    "The deployment": (
        V(
            "DATABASE_URL",
            "text",
            "",
            "the database (`postgres://user@host:5432/name` in a deployment)",
            shown="SQLite `db.sqlite3` in the project folder",
        ),
        V(
            "DATABASE_REPLICA_URLS",
            "list",
            (),
            "PostgreSQL read replicas (comma-separated URLs, streaming from `DATABASE_URL`) that serve "
            "the pages' and the read API's queries; writes, background work and whoever just wrote use the primary",
            shown="none: the primary serves everything",
        ),
        V(
            "DATABASE_REPLICA_PIN_S",
            "int",
            15,
            "seconds after a person's (or an API key's) write during which their reads stay on the "
            "primary, so that they read what they wrote",
            minimum=0,
        ),
        V(
            "DATABASE_REPLICA_MAX_LAG_S",
            "int",
            30,
            "a replica further behind the primary than this (or unreachable) serves no reads until it catches up",
            minimum=1,
        ),
        V("DATABASE_CONN_MAX_AGE", "int", 60, "seconds a database connection is kept for the next request", minimum=0),
        V(
            "DATABASE_PREPARED_STATEMENTS",
            "bool",
            True,
            "PostgreSQL keeps the hottest statement (`POST evaluate`'s "
            "write) prepared on each connection; `false` behind a pooler in transaction mode (PgBouncer before 1.21)",
        ),
        V(
            "CELERY_BROKER_URL",
            "text",
            "filesystem://",
            "Celery's broker (`redis://host:6379/0` in a deployment)",
            shown="`filesystem://` (under `KINDGI_VAR_DIR/broker`)",
        ),
        V(
            "KINDGI_VAR_DIR",
            "text",
            "",
            "where the console writes: the filesystem broker, uploads, static files, "
            "beat's schedule, the SQLite test database",
            shown="`var/` in the project folder",
        ),
        V(
            "KINDGI_PREFIX",
            "text",
            "kindgi",
            "the first part of the console's Celery queue names (`kindgi-runs`, ...) and cache keys: "
            "consoles that share one Redis each set their own",
        ),
        ENGINE.variable("DJANGO_DEBUG"),
        V(
            "DJANGO_SECRET_KEY",
            "text",
            "",
            "Django's secret key",
            shown="a local-only key while debug is on; required when it is off",
        ),
        V(
            "DJANGO_ALLOWED_HOSTS",
            "list",
            ("localhost", "127.0.0.1", "[::1]", "testserver"),
            "host names the console answers to (comma-separated)",
        ),
        V(
            "DJANGO_CSRF_TRUSTED_ORIGINS",
            "list",
            (),
            "origins trusted for form posts, e.g. `https://console.example.com`",
        ),
        V(
            "DJANGO_SECURE_SSL_REDIRECT",
            "bool",
            True,
            "with debug off, redirect plain HTTP to HTTPS; the TLS proxy must send `X-Forwarded-Proto: https`",
        ),
        V("DJANGO_HSTS_SECONDS", "int", 31536000, "with debug off, the `Strict-Transport-Security` max-age", minimum=0),
        V("KINDGI_LOG_LEVEL", "text", "INFO", "the root logger's level"),
        V("KINDGI_API_RATE", "text", "3000/minute", "API throttle per key or user (`N/second|minute|hour|day`)"),
        V(
            "KINDGI_RUNTIME_RATE",
            "text",
            "60000/minute",
            "POST evaluate and ingestion: their own throttle per key (a key's own rate replaces it)",
        ),
        V(
            "KINDGI_CACHE_URL",
            "text",
            "",
            "the Redis of the shared cache (API throttle, sign-in limit); give it a database of its own",
            shown="the broker's URL when it is Redis, else a database table",
        ),
        V(
            "KINDGI_SIGNIN_FAILURES",
            "int",
            5,
            "failed sign-ins allowed per username and client address in the window "
            "(ten times as many per address, and per username from addresses it never signed in from)",
            minimum=1,
        ),
        V("KINDGI_SIGNIN_WINDOW_S", "int", 900, "the sign-in limit's window in seconds", minimum=1),
        V(
            "KINDGI_TRUSTED_PROXIES",
            "list",
            (),
            "addresses or networks of the proxies whose `X-Forwarded-For` names the client "
            "(sign-in limit); none: the header is ignored",
        ),
        V(
            "KINDGI_METRICS_ALLOWED_NETWORKS",
            "list",
            (),
            "addresses or networks (CIDR) that may read `/metrics` without a key (the peer's address, "
            "or the client's behind `KINDGI_TRUSTED_PROXIES`); elsewhere a console-wide key with the `metrics` scope",
            shown="none",
        ),
        V(
            "KINDGI_PAGE_COUNT_CAP",
            "int",
            10_000,
            "the most rows a page's count reads (the overview's and the review queue's figures): "
            "past it the page shows the cap with a + (10,000+), so that pages cost the same at any table size",
            minimum=1,
        ),
        V(
            "KINDGI_LOG_FORMAT",
            "text",
            "text",
            "`json`: every log record as one JSON object a line, and one line per request and per task "
            "(request id, tenant, key prefix, status, duration); `text`: plain lines",
        ),
    ),
    "Single sign-on": (
        V(
            "KINDGI_OIDC_ISSUER",
            "text",
            "",
            "the OpenID Connect provider's issuer URL (its endpoints are read from "
            "`ISSUER/.well-known/openid-configuration` unless given below); with `KINDGI_OIDC_CLIENT_ID`, "
            "the sign-in page offers single sign-on",
            shown="none (no single sign-on)",
        ),
        V("KINDGI_OIDC_CLIENT_ID", "text", "", "the console's client id at the provider"),
        V("KINDGI_OIDC_CLIENT_SECRET", "text", "", "the console's client secret at the provider"),
        V("KINDGI_OIDC_SCOPES", "text", "openid email profile", "the scopes asked for (space-separated)"),
        V("KINDGI_OIDC_PROVIDER_NAME", "text", "single sign-on", "the provider as the sign-in button names it"),
        V(
            "KINDGI_OIDC_GROUPS_CLAIM",
            "text",
            "groups",
            "the claim (ID token or userinfo) that lists the person's groups",
        ),
        V(
            "KINDGI_OIDC_GROUPS",
            "text",
            "",
            'which groups grant which tenant and role: JSON `{"group": {"tenant": "acme", "role": '
            '"reviewer"}}` (a list of such objects grants several), or `group=tenant:role,...`',
            shown="none (single sign-on grants nothing, so makes no account)",
        ),
        V(
            "KINDGI_OIDC_USERNAME_CLAIM",
            "text",
            "preferred_username",
            "the claim an account made at the first sign-in is named after (else the e-mail, else the subject)",
        ),
        V("KINDGI_OIDC_SIGN_ALGO", "text", "RS256", "the ID token's signing algorithm (RS256, ES256, ...)"),
        V(
            "KINDGI_OIDC_AUTHORIZATION_ENDPOINT",
            "text",
            "",
            "the provider's authorization endpoint",
            shown="discovered",
        ),
        V("KINDGI_OIDC_TOKEN_ENDPOINT", "text", "", "the provider's token endpoint", shown="discovered"),
        V("KINDGI_OIDC_USERINFO_ENDPOINT", "text", "", "the provider's userinfo endpoint", shown="discovered"),
        V("KINDGI_OIDC_JWKS_URI", "text", "", "the provider's signing keys (JWKS)", shown="discovered"),
        V("KINDGI_OIDC_TIMEOUT_S", "int", 10, "seconds a call to the provider may take", minimum=1),
        V(
            "KINDGI_PASSWORD_SIGNIN",
            "bool",
            True,
            "`false`: passwords no longer sign in (the sign-in page, the admin's), only single sign-on does",
        ),
    ),
    "Background work": (
        V(
            "KINDGI_BROKER_POLL_MS",
            "int",
            200,
            "how often an idle worker looks for a message on the filesystem broker",
            minimum=10,
        ),
        V(
            "CELERY_VISIBILITY_TIMEOUT",
            "int",
            600,
            "seconds before Redis gives a lost worker's message to another",
            minimum=1,
        ),
        V("CELERY_TASK_ALWAYS_EAGER", "bool", False, "run tasks in the calling process (tests only)"),
        V(
            "CELERY_TASK_TIME_LIMIT",
            "int",
            300,
            "seconds a task may run before its worker process is killed",
            minimum=1,
        ),
        V("CELERY_TASK_SOFT_TIME_LIMIT", "int", 270, "seconds before a task is asked to stop", minimum=1),
        V(
            "KINDGI_EVALUATION_CHUNK_SIZE",
            "int",
            2000,
            "traces per chunk of an evaluation run (one task each)",
            minimum=1,
        ),
        V("KINDGI_EVALUATION_BATCH", "int", 1000, "traces a chunk reads, evaluates and writes together", minimum=1),
        V(
            "KINDGI_CHUNK_SECONDS",
            "int",
            120,
            "a chunk that has run this long stores what it evaluated and hands the rest back as a new chunk",
            minimum=1,
            shown="120, at most half of `CELERY_TASK_SOFT_TIME_LIMIT`",
        ),
        V(
            "KINDGI_JUDGE_CONCURRENCY",
            "int",
            8,
            "llm-judge calls a chunk makes at once (its traces evaluated on as many threads)",
            minimum=1,
        ),
        V(
            "KINDGI_JUDGE_CALL_ESTIMATE_MS",
            "int",
            2000,
            "a judge call's time assumed when sizing a run's chunks, until the ledger has seen the guardrail's calls",
            minimum=1,
        ),
        V(
            "KINDGI_CHUNK_LEASE_SECONDS",
            "int",
            15,
            "how long a running chunk's or upload's claim is trusted without "
            "a heartbeat (renewed every third of it while its worker lives)",
            minimum=1,
        ),
        V(
            "KINDGI_QUEUED_LEASE_SECONDS",
            "int",
            300,
            "how long a queued chunk's or upload's message is trusted before it is sent again",
            minimum=1,
        ),
        V(
            "KINDGI_CHUNK_MAX_ATTEMPTS",
            "int",
            5,
            "a chunk or upload lost this many times in a row fails with the reason",
            minimum=1,
        ),
        V(
            "KINDGI_CHUNK_CHECK_SECONDS",
            "int",
            10,
            "how often the periodic check sends work whose lease ran out",
            minimum=1,
        ),
        V(
            "KINDGI_RETENTION_BATCH",
            "int",
            1000,
            "traces or ledger entries deleted per transaction by retention",
            minimum=1,
        ),
        V(
            "KINDGI_RETENTION_CHECK_SECONDS",
            "int",
            3600,
            "how often retention (a tenant's RetentionPolicy) runs",
            minimum=1,
        ),
        V(
            "KINDGI_WORKER_HEARTBEAT_SECONDS",
            "int",
            10,
            "how often a worker writes its heartbeat row; pages of waiting work say when none was seen for three",
            minimum=1,
        ),
    ),
    "Ingestion": (
        ENGINE.variable("KINDGI_MAX_TRACE_BYTES"),
        V("KINDGI_MAX_REQUEST_BYTES", "int", 10 * MIB, "largest request body", minimum=1024, shown="10 MiB"),
        V("KINDGI_MAX_BATCH", "int", 1000, "most traces in one ingestion request", minimum=1),
        ENGINE.variable("KINDGI_MAX_DEPTH"),
        V(
            "KINDGI_REQUEST_TIME_LIMIT_S",
            "int",
            30,
            "seconds a request that takes traces (POST traces, POST evaluate, the OTLP export) may run: "
            "past it, it stops, stores nothing and answers 503",
            minimum=1,
        ),
        V("KINDGI_UPLOAD_BATCH", "int", 500, "traces of an upload stored per transaction", minimum=1),
        V("KINDGI_UPLOAD_MAX_ERRORS", "int", 1000, "bad lines an upload keeps (all are counted)", minimum=1),
        V(
            "KINDGI_UPLOAD_PIECE_LINES",
            "int",
            50_000,
            "an upload is read in pieces of at most this many traces, one task each",
            minimum=1,
        ),
        V(
            "KINDGI_UPLOAD_PIECE_SECONDS",
            "int",
            60,
            "... and of at most this many seconds",
            minimum=0,
            shown="60, at most a quarter of `CELERY_TASK_SOFT_TIME_LIMIT`",
        ),
        V(
            "KINDGI_UPLOAD_MAX_BYTES_DECOMPRESSED",
            "int",
            4 * 1024 * MIB,
            "an uploaded file that expands past this (gzip) fails with the reason",
            minimum=1024,
            shown="4 GiB",
        ),
        ENGINE.variable("KINDGI_UPLOAD_MAX_BLANK_LINES"),
        V("KINDGI_OTLP_TURN_TIMEOUT_S", "int", 60, "OTLP: how long a turn waits for its agent span", minimum=1),
        V("KINDGI_OTLP_MAX_PENDING_SPANS", "int", 10000, "OTLP: spans waiting per tenant", minimum=1),
        V("KINDGI_OTLP_FLOW_ATTRIBUTE", "text", "kindgi.flow", "OTLP: the span attribute naming the flow"),
        V(
            "KINDGI_OTLP_TENANT_ATTRIBUTE",
            "text",
            "kindgi.tenant",
            "OTLP: the resource attribute naming the tenant for a console-wide key",
        ),
    ),
    "Guardrails, packs and the judge": (
        ENGINE.variable("KINDGI_PRODUCTION"),
        ENGINE.variable("KINDGI_CHECK_PACKS"),
        V(
            "KINDGI_PACK_DIRS",
            "list",
            (),
            "outside production, the only folders `filesystem` code artifacts load from (none: they are refused)",
        ),
        ENGINE.variable("KINDGI_SANDBOX_MEM_MB"),
        ENGINE.variable("KINDGI_SANDBOX_CPU_MS"),
        ENGINE.variable("KINDGI_SANDBOX_POOL_SIZE"),
        ENGINE.variable("KINDGI_CAPABILITIES"),
        ENGINE.variable("KINDGI_BINDINGS"),
        ENGINE.variable("KINDGI_SECRETS"),
        ENGINE.variable("KINDGI_PACK_ENV"),
        V(
            "KINDGI_EVALUATE_TIME_LIMIT_S",
            "int",
            30,
            "seconds a synchronous evaluation (POST evaluate, ingestion) may take in all",
            minimum=1,
        ),
        ENGINE.variable("KINDGI_JUDGE_CALL_LIMIT_S"),
        V("KINDGI_JUDGE_CIRCUIT_FAILURES", "int", 5, "judge: failed attempts in a row that open a circuit", minimum=1),
        V("KINDGI_JUDGE_CIRCUIT_WINDOW_S", "int", 60, "judge: ... counted within this many seconds", minimum=1),
        V(
            "KINDGI_JUDGE_CIRCUIT_COOLDOWN_S",
            "int",
            30,
            "judge: an open circuit fails calls at once this long",
            minimum=1,
        ),
        ENGINE.variable("KINDGI_API_KEY"),
        V(
            "KINDGI_DEMO_JUDGE",
            "bool",
            False,
            "serve the demo's judge provider at `/demo-judge/v1/chat/completions` (`load_demo`'s judge models)",
            shown="`DJANGO_DEBUG`",
        ),
    ),
    "Alerts and e-mail": (
        V("KINDGI_ALERT_CHECK_SECONDS", "int", 60, "how often alert rules are evaluated", minimum=1),
        V("KINDGI_ALERT_SEND_TIMEOUT_S", "int", 10, "one delivery attempt's deadline", minimum=1),
        V(
            "KINDGI_ALERT_RETRY_BASE_S",
            "int",
            30,
            "first pause between delivery attempts (doubled each time)",
            minimum=1,
        ),
        V("KINDGI_ALERT_RETRY_MAX_S", "int", 3600, "longest pause between delivery attempts", minimum=1),
        V("KINDGI_ALERT_MAX_ATTEMPTS", "int", 8, "attempts before a delivery fails for good", minimum=1),
        V(
            "KINDGI_ALERT_PRIVATE_URLS",
            "bool",
            False,
            "allow webhooks to loopback and private addresses",
            shown="`DJANGO_DEBUG`",
        ),
        V(
            "EMAIL_HOST",
            "text",
            "",
            "SMTP server for e-mail alert channels and member invitations",
            shown="none (e-mails are printed)",
        ),
        V("EMAIL_PORT", "int", 587, "SMTP port", minimum=1),
        V("EMAIL_HOST_USER", "text", "", "SMTP user"),
        V("EMAIL_HOST_PASSWORD", "text", "", "SMTP password"),
        V("EMAIL_USE_TLS", "bool", True, "SMTP with STARTTLS"),
        V("EMAIL_TIMEOUT", "int", 10, "SMTP timeout in seconds", minimum=1),
        V("DEFAULT_FROM_EMAIL", "text", "kindgi@localhost", "the sender of alert and invitation e-mails"),
    ),
    "The test suite": (
        V(
            "PYTEST_XDIST_WORKER",
            "text",
            "",
            "tests: set by pytest-xdist; each test process gets its own `KINDGI_VAR_DIR` and `KINDGI_PREFIX` "
            "(tests/processes.py)",
            shown="none",
        ),
        V("KINDGI_REQUIRE_SERVICES", "text", "", "tests: `1` makes the suite fail without PostgreSQL and Redis"),
        V("KINDGI_CHROMIUM", "text", "/usr/bin/chromium", "tests: the Chromium the browser tests drive"),
    ),
}
DECLARATION = Declaration(variable for section in SECTIONS.values() for variable in section)


def _improperly_configured(read: Callable[P, T]) -> Callable[P, T]:
    @wraps(read)
    def reader(*args: P.args, **kwargs: P.kwargs) -> T:
        try:
            return read(*args, **kwargs)
        except BadValue as error:
            raise ImproperlyConfigured(str(error)) from None

    return reader


text = _improperly_configured(DECLARATION.text)
flag = _improperly_configured(DECLARATION.flag)
whole = _improperly_configured(DECLARATION.whole)
items = _improperly_configured(DECLARATION.items)
