"""Settings, all from environment variables (see ../shared/contracts/README.md).

DATABASE_URL picks the database (default: a SQLite file, no server needed); REDIS_URL the task broker
(default: none, tasks run in the calling process).
"""

import json
import os
from pathlib import Path

import dj_database_url

BASE_DIR = Path(__file__).resolve().parent.parent


def env_bool(name: str, default: bool) -> bool:
    value = os.environ.get(name)
    if value is None:
        return default
    return value.strip().lower() in {"1", "true", "yes", "on"}


def env_list(name: str, default: str) -> list[str]:
    return [item.strip() for item in os.environ.get(name, default).split(",") if item.strip()]


DEBUG = env_bool("DEBUG", False)
SECRET_KEY = os.environ.get("SECRET_KEY", "dreamweb-dev-only-insecure-key-change-me")
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", "127.0.0.1,localhost,testserver")
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", "")

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django.contrib.postgres",
    "django_htmx",
    "template_partials",
    "rest_framework",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "csp",
    "axes",
    "dreamweb",
    "memory",
    "skills_registry",
    "reviews",
    # Demo data for `make run` (seed_demo): wiring that may use every app, and that no app uses.
    "demo",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    # Before anything reads a body: 413 past DREAMWEB_MAX_REQUEST_BYTES (JSON under /api/).
    "dreamweb.middleware.InputGuardMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    # After authentication: opens the request's transaction and sets the row-level-security team scope.
    "dreamweb.middleware.TeamScopeMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    # django-htmx's, where a history restore (Back) asks for the whole page; Vary on every HTML answer.
    "dreamweb.middleware.HtmxMiddleware",
    # An htmx request that needs a sign-in gets an HX-Redirect to the sign-in page, not the page in its target.
    "dreamweb.middleware.HtmxLoginMiddleware",
    # With the person's header known: a query string or form with a NUL is a 400 page naming the field.
    "dreamweb.middleware.PageInputMiddleware",
    # A signed-in person in no team gets a page saying how to join or start one (dreamweb.gates.NoTeam).
    "dreamweb.middleware.NoTeamMiddleware",
    "csp.middleware.CSPMiddleware",
    # Last, as django-axes asks: turns a locked-out sign-in into its 429 page.
    "axes.middleware.AxesMiddleware",
]

ROOT_URLCONF = "dreamweb.urls"
WSGI_APPLICATION = "dreamweb.wsgi.application"

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
                "dreamweb.context_processors.teams",
            ],
        },
    }
]

DATABASE_URL = os.environ.get("DATABASE_URL", f"sqlite:///{BASE_DIR / 'db.sqlite3'}")
DATABASES = {"default": dj_database_url.parse(DATABASE_URL, conn_max_age=int(os.environ.get("CONN_MAX_AGE", "0")))}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # Several threads (runserver, in-process tasks) write to one file: wait for the lock instead of failing.
    DATABASES["default"]["OPTIONS"] = {"timeout": 30}
DATABASES["default"]["TEST"] = {"NAME": os.environ.get("DREAMWEB_TEST_DB_NAME") or None}
# Behind PgBouncer in transaction pooling mode (docs/scaling.md): no server-side cursors (QuerySet.iterator() then
# fetches in one go); the team scope is transaction-local and needs nothing else.
if os.environ.get("DATABASE_DISABLE_SERVER_SIDE_CURSORS", "").lower() in ("1", "true", "yes"):
    DATABASES["default"]["DISABLE_SERVER_SIDE_CURSORS"] = True
# The API's hot statements are prepared once per connection (dreamweb.prepared). Off behind PgBouncer in transaction
# pooling mode before 1.21 or with its max_prepared_statements at 0: a statement prepared on one server connection is
# missing on the next (docker-compose.yml turns it off).
DREAMWEB_DB_PREPARED_STATEMENTS = os.environ.get("DATABASE_PREPARED_STATEMENTS", "true").lower() in ("1", "true", "yes")
# The owner role runs migrations and owns the tables; the application role (DATABASE_URL) does not.
# Tests create and migrate their database as the owner, then run as the application role.
DATABASE_OWNER_URL = os.environ.get("DATABASE_OWNER_URL", "")
DREAMWEB_DB_APP_ROLE = os.environ.get("DREAMWEB_DB_APP_ROLE", "dreamweb_app")

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "home"
LOGOUT_REDIRECT_URL = "login"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = BASE_DIR / "staticfiles"
STATICFILES_DIRS = [BASE_DIR / "static"]
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedStaticFilesStorage"},
}
WHITENOISE_USE_FINDERS = True

SESSION_COOKIE_HTTPONLY = True
CSRF_COOKIE_HTTPONLY = False

# --- Production: HTTPS, cookies, headers (all from the environment; docs/deploy.md has the production values) -------
# Behind a TLS-terminating proxy that sets X-Forwarded-Proto (and X-Forwarded-For): DREAMWEB_PROXY_COUNT=1.
DREAMWEB_PROXY_COUNT = int(os.environ.get("DREAMWEB_PROXY_COUNT", "0"))
SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https") if DREAMWEB_PROXY_COUNT else None
SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT", False)
# The compose health check and load balancers probe over plain HTTP inside the network.
SECURE_REDIRECT_EXEMPT = [r"^healthz$"]
SECURE_HSTS_SECONDS = int(os.environ.get("SECURE_HSTS_SECONDS", "0"))
SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("SECURE_HSTS_INCLUDE_SUBDOMAINS", False)
SECURE_HSTS_PRELOAD = env_bool("SECURE_HSTS_PRELOAD", False)
SESSION_COOKIE_SECURE = env_bool("SESSION_COOKIE_SECURE", False)
CSRF_COOKIE_SECURE = env_bool("CSRF_COOKIE_SECURE", False)
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
X_FRAME_OPTIONS = "DENY"

# Content-Security-Policy on every response (django-csp): scripts, styles and everything else from this site only;
# htmx is configured not to evaluate (base.html). Style attributes stay allowed (progress bars, the Django admin):
# they cannot run code, and untrusted text is never rendered unescaped.
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": ["'self'"],
        "script-src": ["'self'"],
        "style-src": ["'self'"],
        "style-src-attr": ["'unsafe-inline'"],
        "img-src": ["'self'", "data:"],
        "font-src": ["'self'"],
        "connect-src": ["'self'"],
        "object-src": ["'none'"],
        "base-uri": ["'none'"],
        "frame-ancestors": ["'none'"],
        "form-action": ["'self'"],
    }
}

# --- Sign-in: repeated failures lock the username from that address (django-axes) -------------------------------
AUTHENTICATION_BACKENDS = ["axes.backends.AxesStandaloneBackend", "django.contrib.auth.backends.ModelBackend"]
AXES_FAILURE_LIMIT = int(os.environ.get("DREAMWEB_LOGIN_FAILURE_LIMIT", "5"))
AXES_COOLOFF_TIME = float(os.environ.get("DREAMWEB_LOGIN_COOLOFF_MINUTES", "15")) / 60  # hours
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True
AXES_CLIENT_IP_CALLABLE = "dreamweb.security.client_ip"
AXES_LOCKOUT_TEMPLATE = "registration/locked_out.html"

# --- Tasks -------------------------------------------------------------------------------------------
REDIS_URL = os.environ.get("REDIS_URL", "")
CELERY_BROKER_URL = REDIS_URL or "memory://"
CELERY_RESULT_BACKEND = REDIS_URL or None
# Without a broker, tasks run eagerly in the calling process: the same code, no servers.
CELERY_TASK_ALWAYS_EAGER = not REDIS_URL
CELERY_TASK_EAGER_PROPAGATES = True
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
# One unacknowledged message per worker process at a time: a model's batch takes minutes, and a second message
# reserved behind it would wait there while another worker sits idle. Measured for the rules analyzer (issue 15, stop
# 21: docs/benchmarks.md), where a batch takes ~50 ms: the queue's own cost is ~1.5 ms of worker CPU and wall a task
# (prefork or solo pool, multiplier 1 or 4 alike, within the noise), i.e. ~3 % of a batch of 100 sessions, so a
# larger multiplier would buy the rules runs nothing worth the model runs' imbalance.
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
# Celery's fixup closes the database connection around every task unless this is set; dreamweb.celery applies
# Django's own rule instead (kept for DREAMWEB_WORKER_CONN_MAX_AGE seconds, closed when broken).
CELERY_DB_REUSE_MAX = 10**9
CELERY_TASK_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_TIMEZONE = "UTC"
CELERY_BEAT_SCHEDULE = {
    "dream-schedules": {"task": "reviews.tasks.run_scheduled_dreams", "schedule": 60.0},
    "session-events-retention": {"task": "reviews.tasks.prune_session_events", "schedule": 24 * 3600.0},
}
# The queue tasks go to (workers consume it with -Q); tests give their workers a queue of their own.
CELERY_TASK_DEFAULT_QUEUE = os.environ.get("DREAMWEB_CELERY_QUEUE", "celery")
# e.g. {"visibility_timeout": 3600}: how long an unacknowledged task waits before another worker gets it again.
CELERY_BROKER_TRANSPORT_OPTIONS = json.loads(os.environ.get("DREAMWEB_BROKER_TRANSPORT_OPTIONS", "{}"))

# --- Shared cache: with Redis, one cache for every process (the API's per-key rate limit counts across workers) ----
CACHE_URL = os.environ.get("DREAMWEB_CACHE_URL", "") or REDIS_URL
CACHES = {
    "default": (
        {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": CACHE_URL, "KEY_PREFIX": "dreamweb"}
        if CACHE_URL
        else {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}
    )
}

# --- Language model ----------------------------------------------------------------------------------
OPENAI_API_KEY = os.environ.get("OPENAI_API_KEY", "")
OPENAI_BASE_URL = os.environ.get("OPENAI_BASE_URL", "")
DREAMWEB_LLM_MODEL = os.environ.get("DREAMWEB_LLM_MODEL", "")
DREAMWEB_LLM_TIMEOUT = float(os.environ.get("DREAMWEB_LLM_TIMEOUT", "60"))
DREAMWEB_LLM_MAX_RETRIES = int(os.environ.get("DREAMWEB_LLM_MAX_RETRIES", "2"))
# Characters of transcript one LLM analysis reads (errors, corrections and notes are kept first).
DREAMWEB_LLM_TRANSCRIPT_CHARS = int(os.environ.get("DREAMWEB_LLM_TRANSCRIPT_CHARS", "48000"))
DREAMWEB_LLM_MAX_OUTPUT_TOKENS = int(os.environ.get("DREAMWEB_LLM_MAX_OUTPUT_TOKENS", "4000"))
# Sampling temperature; unset, the server's default is used (some models take no other value).
DREAMWEB_LLM_TEMPERATURE = (
    float(os.environ["DREAMWEB_LLM_TEMPERATURE"]) if os.environ.get("DREAMWEB_LLM_TEMPERATURE") else None
)
# Seconds that what an endpoint takes (response format, name of the token limit) is remembered before the best
# format is asked for again (reviews/analysis/structured_output.py).
DREAMWEB_LLM_FORMAT_TTL = int(os.environ.get("DREAMWEB_LLM_FORMAT_TTL", "86400"))
# USD per million tokens, {"model": [input, output]}: the run's estimated cost (unknown models cost 0).
DREAMWEB_LLM_PRICES = json.loads(os.environ.get("DREAMWEB_LLM_PRICES", "{}"))

# --- Dreams ------------------------------------------------------------------------------------------
# Sessions per task of a dream run; 0 (the default): by analyzer (reviews.dreams.runs.batch_size_for).
DREAMWEB_DREAM_BATCH_SIZE = int(os.environ.get("DREAMWEB_DREAM_BATCH_SIZE", "0") or 0)
# Task-level retries of a batch after a rate limit, timeout or connection error (then the session fails).
DREAMWEB_ANALYSIS_MAX_RETRIES = int(os.environ.get("DREAMWEB_ANALYSIS_MAX_RETRIES", "3"))
DREAMWEB_ISOLATED_CAP = int(os.environ.get("DREAMWEB_ISOLATED_CAP", "200"))
# Operator-installed analyzers, "name=module:function,...": never taken from a policy or a request.
DREAMWEB_EXTRA_ANALYZERS = dict(item.split("=", 1) for item in env_list("DREAMWEB_EXTRA_ANALYZERS", "") if "=" in item)

# --- Limits ------------------------------------------------------------------------------------------
DREAMWEB_MAX_SESSION_BYTES = int(os.environ.get("DREAMWEB_MAX_SESSION_BYTES", str(5 * 1024 * 1024)))
# Days after which the raw events of a consumed session are dropped (reviews.retention; evidence excerpts and the
# session row are kept, unconsumed sessions untouched). 0: keep every event.
DREAMWEB_SESSION_EVENTS_RETENTION_DAYS = int(os.environ.get("DREAMWEB_SESSION_EVENTS_RETENTION_DAYS", "0"))
DREAMWEB_MAX_BATCH_SESSIONS = int(os.environ.get("DREAMWEB_MAX_BATCH_SESSIONS", "500"))
# Largest body the session-ingest API reads (one session or a batch); past it the API answers 413 itself.
DREAMWEB_MAX_REQUEST_BYTES = int(os.environ.get("DREAMWEB_MAX_REQUEST_BYTES", str(32 * 1024 * 1024)))
# Django refuses bodies past this before any view runs; keep it just above the API's own limit.
DATA_UPLOAD_MAX_MEMORY_SIZE = DREAMWEB_MAX_REQUEST_BYTES + 1024 * 1024
# JSON nested deeper than this is refused (400) wherever it comes in: API bodies, each session, imported files.
DREAMWEB_MAX_JSON_DEPTH = int(os.environ.get("DREAMWEB_MAX_JSON_DEPTH", "64"))
# Largest memory entry (UTF-8 bytes of its content), whoever writes it: API, import, dream, page.
DREAMWEB_MAX_ENTRY_BYTES = int(os.environ.get("DREAMWEB_MAX_ENTRY_BYTES", str(64 * 1024)))
# Context served to agents: defaults and hard caps of the injection budget.
DREAMWEB_CONTEXT_DEFAULT_ITEMS = int(os.environ.get("DREAMWEB_CONTEXT_DEFAULT_ITEMS", "20"))
DREAMWEB_CONTEXT_MAX_ITEMS = int(os.environ.get("DREAMWEB_CONTEXT_MAX_ITEMS", "200"))
DREAMWEB_CONTEXT_DEFAULT_TOKENS = int(os.environ.get("DREAMWEB_CONTEXT_DEFAULT_TOKENS", "2000"))
DREAMWEB_CONTEXT_MAX_TOKENS = int(os.environ.get("DREAMWEB_CONTEXT_MAX_TOKENS", "32000"))
# memory.ranking_cache: stores whose ranking data each worker process keeps (0: none, every request runs the ranking
# statement), the largest store it keeps, and how soon after a build a store that changed again is rebuilt.
DREAMWEB_CONTEXT_CACHE_STORES = int(os.environ.get("DREAMWEB_CONTEXT_CACHE_STORES", "64"))
DREAMWEB_CONTEXT_CACHE_MAX_ENTRIES = int(os.environ.get("DREAMWEB_CONTEXT_CACHE_MAX_ENTRIES", "200000"))
DREAMWEB_CONTEXT_CACHE_MIN_REBUILD_S = float(os.environ.get("DREAMWEB_CONTEXT_CACHE_MIN_REBUILD_S", "1.0"))

# --- API ---------------------------------------------------------------------------------------------
REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [],
    "DEFAULT_PERMISSION_CLASSES": [],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    "DEFAULT_PAGINATION_CLASS": "rest_framework.pagination.LimitOffsetPagination",
    "PAGE_SIZE": 50,
    "UNAUTHENTICATED_USER": None,
    "EXCEPTION_HANDLER": "dreamweb.api_base.exception_handler",
    # Per agent key (dreamweb.api_throttling.AgentKeyRateThrottle); 429 with Retry-After past it.
    "DEFAULT_THROTTLE_RATES": {"agent_key": os.environ.get("DREAMWEB_API_KEY_RATE", "1200/min")},
}
SPECTACULAR_SETTINGS = {
    "TITLE": "Dreamweb agents' API",
    "DESCRIPTION": (
        "Memory, context, sessions and skills for AI agents. Authenticate with `Authorization: Api-Key <key>`."
    ),
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "ENUM_NAME_OVERRIDES": {
        "EntryStatusEnum": "memory.models.EntryStatus",
        "ProposalStatusEnum": "reviews.models.ProposalStatus",
        "RunStatusEnum": "reviews.models.RunStatus",
    },
}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": os.environ.get("LOG_LEVEL", "WARNING")},
}
