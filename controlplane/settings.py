"""Settings: the one module that reads the environment.

Every value has a development default so ``sluice up`` needs nothing; a
deployment overrides them with environment variables. There are no separate
production settings.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path
from typing import Any

import dj_database_url
from django.core.exceptions import ImproperlyConfigured
from limits import parse_many as _parse_rate_limits

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(os.environ.get("SLUICE_VAR_DIR", BASE_DIR / "var"))


def _env_bool(name: str, default: bool) -> bool:
    return os.environ.get(name, str(default)).strip().lower() in {"1", "true", "yes", "on"}


def _env_list(name: str, default: str) -> list[str]:
    return [item.strip() for item in os.environ.get(name, default).split(",") if item.strip()]


def _secret_key() -> str:
    """SECRET_KEY from the env, else one generated once and kept under var/."""
    if key := os.environ.get("SECRET_KEY"):
        return key
    path = VAR_DIR / "secret_key"
    if not path.exists():
        VAR_DIR.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as fh:
            fh.write(secrets.token_urlsafe(50))
    return path.read_text().strip()


SECRET_KEY = _secret_key()
DEBUG = _env_bool("DEBUG", False)
ALLOWED_HOSTS = _env_list("ALLOWED_HOSTS", "localhost,127.0.0.1,[::1],testserver")
CSRF_TRUSTED_ORIGINS = _env_list("CSRF_TRUSTED_ORIGINS", "http://localhost:8000,http://127.0.0.1:8000")

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "django_filters",
    "drf_spectacular",
    "drf_spectacular_sidecar",  # Swagger UI's files, pinned and served from here: /api/docs/ works offline
    "django_celery_beat",
    "channels",
    "corsheaders",
    "controlplane.core",
    "controlplane.tenancy",
    "controlplane.audit",
    "controlplane.clusters",
    "controlplane.resources",
    "controlplane.reconcile",
    "controlplane.agent",
    "controlplane.kafkarest",
    "controlplane.reports",
    "controlplane.registry",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    # Static files (the admin's, Swagger UI's) from the app itself, under uvicorn as under the test client.
    "controlplane.core.staticfiles.StaticFilesMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "corsheaders.middleware.CorsMiddleware",  # before CommonMiddleware, as django-cors-headers requires
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "controlplane.urls"
ASGI_APPLICATION = "controlplane.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]



def _required_url(name: str) -> str:
    """The URL of a data service; `sluice`, `manage.py` and the test harness set
    these (starting embedded servers when needed), so a missing one is a mistake
    to report, not a reason to guess some other server."""
    value = os.environ.get(name, "")
    if not value:
        raise ImproperlyConfigured(f"{name} is not set: run through `sluice` or manage.py, or export it")
    return value


# Also the dataplane's metadata store: brokers of managed clusters keep their own schema in this database.
DATABASE_URL = _required_url("DATABASE_URL")
DATABASES = {
    "default": dj_database_url.parse(
        DATABASE_URL,
        conn_max_age=int(os.environ.get("DB_CONN_MAX_AGE", "0")),
        conn_health_checks=True,
    )
}
# A connection pool per web process (psycopg_pool): under ASGI every request runs on a fresh thread, so without
# one each request opened its own Postgres connection (~5 ms, most of a small request's cost). Only the web tier
# turns it on (``sluice up`` and docker-compose set DB_POOL_SIZE for it): workers and agents hold session state
# -- reconcile's advisory locks -- that a pooled connection would carry to the next user instead of dropping at
# close. A returned connection is reset anyway (locks released, LISTENs dropped), as a second guard.
_POOL_SIZE = int(os.environ.get("DB_POOL_SIZE", "0"))


def _reset_pooled_connection(conn: Any) -> None:
    conn.execute("SELECT pg_advisory_unlock_all()")
    conn.execute("UNLISTEN *")


if _POOL_SIZE > 0:
    DATABASES["default"]["CONN_MAX_AGE"] = 0  # pooling replaces persistent connections
    # A health check is a round trip per checkout; the pool already drops connections that come back broken.
    DATABASES["default"]["CONN_HEALTH_CHECKS"] = False
    DATABASES["default"].setdefault("OPTIONS", {})["pool"] = {
        "min_size": 1, "max_size": _POOL_SIZE, "max_idle": 60, "timeout": 30, "reset": _reset_pooled_connection}

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

REDIS_URL = _required_url("REDIS_URL")

CACHES = {
    "default": {
        "BACKEND": "django.core.cache.backends.redis.RedisCache",
        "LOCATION": REDIS_URL,
        "KEY_PREFIX": "sluice:cache",
    }
}

CHANNEL_LAYERS = {
    "default": {
        "BACKEND": "channels_redis.core.RedisChannelLayer",
        "CONFIG": {"hosts": [REDIS_URL], "prefix": "sluice:channels"},
    }
}

CELERY_BROKER_URL = REDIS_URL
CELERY_RESULT_BACKEND = REDIS_URL
CELERY_RESULT_EXPIRES = 3600
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_TASK_DEFAULT_QUEUE = os.environ.get("CELERY_DEFAULT_QUEUE", "sluice")
CELERY_BEAT_SCHEDULER = "django_celery_beat.schedulers:DatabaseScheduler"
# Spark reports run on a queue of their own: its workers hold a Spark session (a JVM) each, and a long report
# never holds up reconcile. ``sluice up`` runs one such worker; SPARK_MASTER picks the Spark master.
SLUICE_REPORTS_QUEUE = os.environ.get("SLUICE_REPORTS_QUEUE", "reports")
CELERY_TASK_ROUTES = {"reports.*": {"queue": SLUICE_REPORTS_QUEUE}}
# Each tenant's share of the reports runner (docs/decisions/0018-reports.md): runs at once (more
# wait queued), runs waiting (more are refused with 429), one run's time, and its result's rows and bytes.
# The runner (a JVM) starts when the reports worker is ready, so the first report does not wait for it; off, it
# starts with the first run (test stacks that run no report).
SLUICE_REPORTS_PRESTART = _env_bool("SLUICE_REPORTS_PRESTART", True)
SLUICE_REPORTS_TENANT_RUNNING = int(os.environ.get("SLUICE_REPORTS_TENANT_RUNNING", "2"))
SLUICE_REPORTS_TENANT_QUEUED = int(os.environ.get("SLUICE_REPORTS_TENANT_QUEUED", "20"))
SLUICE_REPORTS_RUN_SECONDS = float(os.environ.get("SLUICE_REPORTS_RUN_SECONDS", "900"))
SLUICE_REPORTS_RESULT_ROWS = int(os.environ.get("SLUICE_REPORTS_RESULT_ROWS", "1000000"))
SLUICE_REPORTS_RESULT_BYTES = int(os.environ.get("SLUICE_REPORTS_RESULT_BYTES", str(256 * 1024 * 1024)))
CELERY_TIMEZONE = "UTC"
# Report results expire: finished runs older than this many days are deleted with their rows and Parquet files
# (0: never by age), as are a report's runs beyond its newest ``keep_runs``; beat sweeps every
# SLUICE_REPORT_EXPIRY_SECONDS.
SLUICE_REPORT_RESULT_DAYS = float(os.environ.get("SLUICE_REPORT_RESULT_DAYS", "30"))
SLUICE_REPORT_EXPIRY_SECONDS = float(os.environ.get("SLUICE_REPORT_EXPIRY_SECONDS", "600"))
# An agent silent (no heartbeat, no clean stop) for this long is lost for good: reconcile replaces the brokers
# of its host that hold no lease on other hosts with room and moves their replicas there (docs/multi-host.md).
SLUICE_AGENT_LOST_SECONDS = float(os.environ.get("SLUICE_AGENT_LOST_SECONDS", "300"))
# Installed into django-celery-beat's tables by the scheduler at start (schedules live in the database).
CELERY_BEAT_SCHEDULE = {
    "clusters-resync": {"task": "clusters.resync_all",
                        "schedule": float(os.environ.get("SLUICE_RESYNC_SECONDS", "15"))},
    "clusters-throughput": {"task": "clusters.sample_throughput", "schedule": 60.0},
    # On the default queue: the reports worker whose runs are lost may be the one that is gone.
    "reports-reap-lost-runs": {"task": "reports.reap_lost_runs", "schedule": 60.0,
                               "options": {"queue": CELERY_TASK_DEFAULT_QUEUE}},
    "reports-expire-runs": {"task": "reports.expire_runs", "schedule": SLUICE_REPORT_EXPIRY_SECONDS,
                            "options": {"queue": CELERY_TASK_DEFAULT_QUEUE}},
    "clusters-security-events": {"task": "clusters.ingest_security_events", "schedule": 10.0},
}

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
# Static files are served by WhiteNoise straight from the installed apps' static/ directories (its finders mode,
# indexed once at start), so no `collectstatic` step exists to forget or to go stale after an upgrade
# (docs/decisions: offline). STATIC_ROOT is only where `manage.py collectstatic` would copy them.
STATIC_ROOT = VAR_DIR / "static"
WHITENOISE_USE_FINDERS = True
WHITENOISE_AUTOREFRESH = False
# The web console's build (`make console`; frontend/dist), served at "/" by controlplane.core.console.
CONSOLE_DIR = Path(os.environ.get("SLUICE_CONSOLE_DIR", BASE_DIR / "frontend" / "dist"))

# WebSocket live tail (controlplane/kafkarest/tail): browser origins allowed besides this site's own
# (scheme://host[:port], comma-separated; "*" for any), and each viewer's send rate and buffer.
SLUICE_WS_ALLOWED_ORIGINS = _env_list("SLUICE_WS_ALLOWED_ORIGINS", "")
SLUICE_TAIL_BYTES_PER_SECOND = int(os.environ.get("SLUICE_TAIL_BYTES_PER_SECOND", str(1024 * 1024)))
SLUICE_TAIL_BUFFER_BYTES = int(os.environ.get("SLUICE_TAIL_BUFFER_BYTES", str(2 * 1024 * 1024)))
# How often a web process checks, in the database, that the credentials of its open tails and v2 consumer
# instances still work (revocations reach it at once over Redis; this catches a message it missed).
SLUICE_REVOCATION_SWEEP_SECONDS = float(os.environ.get("SLUICE_REVOCATION_SWEEP_SECONDS", "30"))

SESSION_COOKIE_HTTPONLY = True
SESSION_COOKIE_SAMESITE = "Lax"

# Served behind TLS (a proxy that terminates it): SLUICE_BEHIND_TLS=true trusts the proxy's
# X-Forwarded-Proto (SECURE_PROXY_SSL_HEADER), and session and CSRF cookies are then Secure by default
# (SESSION_COOKIE_SECURE / CSRF_COOKIE_SECURE override either way). Only set it behind a proxy that
# overwrites the header: a client could otherwise claim https.
SLUICE_BEHIND_TLS = _env_bool("SLUICE_BEHIND_TLS", False)
SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https") if SLUICE_BEHIND_TLS else None
SESSION_COOKIE_SECURE = _env_bool("SESSION_COOKIE_SECURE", SLUICE_BEHIND_TLS)
CSRF_COOKIE_SECURE = _env_bool("CSRF_COOKIE_SECURE", SLUICE_BEHIND_TLS)
SECURE_HSTS_SECONDS = int(os.environ.get("SECURE_HSTS_SECONDS", "0"))

# Tiered storage (decision 0032): the object store closed segments go to, for clusters whose plan may tier. Unset
# endpoint: `sluice up` starts the embedded one (sluice.objectstore) and exports these; a deployment names its own
# S3-compatible store (endpoint, bucket, optional prefix, region and keys).
SLUICE_REMOTE_STORAGE = {
    name.lower(): os.environ.get(f"SLUICE_REMOTE_STORAGE_{name}", default)
    for name, default in (("ENDPOINT", ""), ("BUCKET", ""), ("PREFIX", ""), ("REGION", "us-east-1"),
                          ("ACCESS_KEY", ""), ("SECRET_KEY", ""))
}
# How often tiering brokers look for closed segments to upload and remote ones to expire (Kafka's
# remote.log.manager.task.interval.ms).
SLUICE_REMOTE_LOG_MANAGER_INTERVAL_MS = int(os.environ.get("SLUICE_REMOTE_LOG_MANAGER_INTERVAL_MS", "30000"))
if bool(SLUICE_REMOTE_STORAGE["endpoint"]) != bool(SLUICE_REMOTE_STORAGE["bucket"]):
    raise ImproperlyConfigured("SLUICE_REMOTE_STORAGE_ENDPOINT and SLUICE_REMOTE_STORAGE_BUCKET go together: set both "
                               "(tiered storage) or neither")

# TLS on managed clusters' Kafka listeners: with a certificate and key (PEM paths, readable on every dataplane
# host, the certificate valid for the hosts brokers advertise) brokers listen with SASL_SSL instead of
# SASL_PLAINTEXT. SLUICE_TLS_CA is the CA clients are told to trust (default: the certificate itself, for a
# self-signed one); its PEM text is part of every cluster's status.
SLUICE_TLS_CERT = os.environ.get("SLUICE_TLS_CERT") or None
SLUICE_TLS_KEY = os.environ.get("SLUICE_TLS_KEY") or None
SLUICE_TLS_CA = os.environ.get("SLUICE_TLS_CA") or None
if bool(SLUICE_TLS_CERT) != bool(SLUICE_TLS_KEY):
    raise ImproperlyConfigured("SLUICE_TLS_CERT and SLUICE_TLS_KEY go together: set both (TLS) or neither")
SECURE_CONTENT_TYPE_NOSNIFF = True

# CORS is closed (no Access-Control-Allow-* headers, so browsers keep other sites' scripts out) unless
# CORS_ALLOWED_ORIGINS lists origins (scheme://host[:port], comma-separated). Credentials (the session
# cookie) cross origins only with CORS_ALLOW_CREDENTIALS=true as well.
CORS_ALLOWED_ORIGINS = _env_list("CORS_ALLOWED_ORIGINS", "")
CORS_ALLOW_CREDENTIALS = _env_bool("CORS_ALLOW_CREDENTIALS", False)
CORS_URLS_REGEX = r"^/(api|kafka)/.*$"

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "controlplane.tenancy.authentication.ApiKeyAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    "DEFAULT_PARSER_CLASSES": ["rest_framework.parsers.JSONParser"],
    "DEFAULT_PAGINATION_CLASS": "controlplane.core.pagination.Pagination",
    "DEFAULT_FILTER_BACKENDS": [
        "django_filters.rest_framework.DjangoFilterBackend",
        "rest_framework.filters.OrderingFilter",
    ],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "EXCEPTION_HANDLER": "controlplane.core.errors.exception_handler",
    "PAGE_SIZE": 50,
    # Failed logins: per client address, and per (username, client address) -- never per username alone, which
    # would let anyone lock the real user out (controlplane/tenancy/login_throttle.py).
    "DEFAULT_THROTTLE_CLASSES": ["controlplane.core.ratelimit.RequestRateThrottle"],
    "DEFAULT_THROTTLE_RATES": {"login": os.environ.get("LOGIN_THROTTLE_RATE", "20/min"),
                               "login_user": os.environ.get("LOGIN_USER_THROTTLE_RATE", "20/min")},
    # The client address throttles key on: REMOTE_ADDR, or with N trusted proxies in front the N-th address
    # from the right of X-Forwarded-For. DRF's default (None) takes X-Forwarded-For as the client sends it,
    # so a guesser could rotate it to escape the login throttle.
    "NUM_PROXIES": int(os.environ.get("NUM_PROXIES", "1" if SLUICE_BEHIND_TLS else "0")),
    "UNAUTHENTICATED_USER": None,
}

SPECTACULAR_SETTINGS = {
    "TITLE": "Sluice API",
    "DESCRIPTION": "Self-service management of Sluice event-streaming clusters, topics, ACLs and credentials.",
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "SCHEMA_PATH_PREFIX": r"/api/v1",
    "COMPONENT_SPLIT_REQUEST": True,
    # Swagger UI from drf-spectacular-sidecar's pinned copy, not a CDN's @latest: the docs page works offline.
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "ENUM_NAME_OVERRIDES": {
        "RoleEnum": "controlplane.tenancy.models.Role.choices",
        "ServiceAccountRoleEnum": "controlplane.tenancy.serializers.NON_OWNER_ROLES",
        # Two fields named "state": without names for both, the schema would rename Rebalance's enum.
        "InvitationStateEnum": "controlplane.tenancy.serializers.INVITATION_STATES",
        "StateEnum": "controlplane.clusters.models.RebalanceState.choices",
        "StatusEnum": ["up", "down"],  # a broker's; named so that other status enums do not rename it
        "ReportRunStatusEnum": "controlplane.reports.models.RunStatus.choices",
        "ReportKindEnum": "controlplane.reports.models.Kind.choices",
    },
}

LOG_LEVEL = os.environ.get("LOG_LEVEL", "INFO")
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": LOG_LEVEL},
    "loggers": {"django.db.backends": {"level": "INFO"}},
}

# REST request-rate limits per API key or session user, in the `limits` library's notation ("3000/minute",
# "50/second;3000/minute"; empty: none), counted in Redis so they hold across web processes
# (controlplane/core/ratelimit.py): the management API, and the REST Proxy (its hot produce paths included).
SLUICE_API_RATE_LIMIT = os.environ.get("SLUICE_API_RATE_LIMIT", "3000/minute")
SLUICE_KAFKAREST_RATE_LIMIT = os.environ.get("SLUICE_KAFKAREST_RATE_LIMIT", "60000/minute")
for _name in ("SLUICE_API_RATE_LIMIT", "SLUICE_KAFKAREST_RATE_LIMIT"):
    try:
        if globals()[_name].strip():
            _parse_rate_limits(globals()[_name])
    except ValueError as _exc:
        raise ImproperlyConfigured(f"{_name}: {_exc}") from None

# Per-tenant ceilings on what a tenant may hold (controlplane/clusters/plans.py): clusters, and brokers summed over
# its clusters, so one tenant cannot fill the agents' shared broker port pools. A staff user overrides them per
# tenant (Tenant.max_clusters / max_brokers in the admin); these are the defaults.
SLUICE_TENANT_MAX_CLUSTERS = int(os.environ.get("SLUICE_TENANT_MAX_CLUSTERS", "5"))
SLUICE_TENANT_MAX_BROKERS = int(os.environ.get("SLUICE_TENANT_MAX_BROKERS", "15"))
# Invitations to join a tenant expire after this many days; at most this many may be pending per tenant.
SLUICE_INVITATION_TTL_DAYS = float(os.environ.get("SLUICE_INVITATION_TTL_DAYS", "7"))
SLUICE_TENANT_MAX_PENDING_INVITATIONS = int(os.environ.get("SLUICE_TENANT_MAX_PENDING_INVITATIONS", "100"))

# E-mail (invitations' links): on when EMAIL_BACKEND or EMAIL_HOST is set; otherwise nothing is mailed and the
# inviter passes on the link the console shows them. Django's own settings, read from the environment.
SLUICE_EMAIL_ENABLED = bool(os.environ.get("EMAIL_BACKEND") or os.environ.get("EMAIL_HOST"))
EMAIL_BACKEND = os.environ.get("EMAIL_BACKEND", "django.core.mail.backends.smtp.EmailBackend")
EMAIL_HOST = os.environ.get("EMAIL_HOST", "localhost")
EMAIL_PORT = int(os.environ.get("EMAIL_PORT", "25"))
EMAIL_HOST_USER = os.environ.get("EMAIL_HOST_USER", "")
EMAIL_HOST_PASSWORD = os.environ.get("EMAIL_HOST_PASSWORD", "")
EMAIL_USE_TLS = _env_bool("EMAIL_USE_TLS", False)
EMAIL_USE_SSL = _env_bool("EMAIL_USE_SSL", False)
EMAIL_TIMEOUT = float(os.environ.get("EMAIL_TIMEOUT", "10"))
DEFAULT_FROM_EMAIL = os.environ.get("DEFAULT_FROM_EMAIL", "sluice@localhost")

# Throttle last-used writes on API keys: at most one UPDATE per key per interval.
API_KEY_LAST_USED_RESOLUTION_SECONDS = int(os.environ.get("API_KEY_LAST_USED_RESOLUTION_SECONDS", "60"))
# REST Proxy v2 consumer instances: the longest a records read waits, and the idle time after which an
# instance is closed (Confluent's consumer.request.timeout.ms and consumer.instance.timeout.ms).
KAFKAREST_CONSUMER_REQUEST_TIMEOUT_MS = int(os.environ.get("KAFKAREST_CONSUMER_REQUEST_TIMEOUT_MS", "1000"))
KAFKAREST_CONSUMER_INSTANCE_TIMEOUT_MS = int(os.environ.get("KAFKAREST_CONSUMER_INSTANCE_TIMEOUT_MS", "300000"))
HEALTH_CELERY_TIMEOUT_SECONDS = float(os.environ.get("HEALTH_CELERY_TIMEOUT_SECONDS", "5"))
