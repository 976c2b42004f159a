"""The platform's one settings module.

Every value comes from the environment with a safe default, so a bare checkout runs the demo on
SQLite with in-process tasks, and production sets DATABASE_URL, CELERY_BROKER_URL and the rest.
"""

import ipaddress
import os
import secrets
import sys
import tempfile
from pathlib import Path

import environ
from csp.constants import NONCE, NONE, SELF
from django.core.exceptions import ImproperlyConfigured

from foley_platform.safety import REFUSING, unsafe_settings

BASE_DIR = Path(__file__).resolve().parent.parent

env = environ.Env()
if (BASE_DIR / ".env").exists():
    environ.Env.read_env(BASE_DIR / ".env")

DEBUG = env.bool("DEBUG", default=False)
DATA_DIR = Path(env("FOLEY_DATA_DIR", default=str(BASE_DIR / "data")))


# Researchers' command-line tools: they read files and print results, signing nothing that
# outlives the process (no sessions, tokens or links), so a fresh install runs them without a
# secret. The web server, workers and every other command still refuse to start without one.
KEYLESS_COMMANDS = frozenset(
    {"compute_fad", "compute_kad", "compute_predictors", "score_offline", "validate_generator"}
)
# Asking manage.py what it can do needs no secret either: it runs nothing.
KEYLESS_COMMANDS |= {"help", "--help", "-h", "--version", "version"}


def _keyless_command() -> bool:
    launcher = Path(sys.argv[0]).name if sys.argv else ""
    return (
        launcher in {"manage.py", "django-admin", "__main__.py"}
        and len(sys.argv) > 1
        and sys.argv[1] in KEYLESS_COMMANDS
    )


def _secret_key() -> str:
    key = env("SECRET_KEY", default="")
    if key:
        return key
    if not DEBUG and _keyless_command():
        return secrets.token_urlsafe(50)  # this process's alone, never stored
    if not DEBUG:
        raise ImproperlyConfigured("SECRET_KEY must be set when DEBUG is off.")
    # A development key is generated once and kept, so sessions survive a restart of the demo.
    key_file = DATA_DIR / ".dev-secret-key"
    if not key_file.exists():
        DATA_DIR.mkdir(parents=True, exist_ok=True)
        key_file.write_text(secrets.token_urlsafe(50))
    return key_file.read_text().strip()


def _checking() -> bool:
    """`manage.py check`: it serves and signs nothing, and its checks name every problem at once
    (foley_platform/safety.py), the accounts with a demo password among them."""
    launcher = Path(sys.argv[0]).name if sys.argv else ""
    return launcher in {"manage.py", "django-admin"} and sys.argv[1:2] == ["check"]


SECRET_KEY = _secret_key()
ALLOWED_HOSTS = env.list("ALLOWED_HOSTS", default=["localhost", "127.0.0.1", "[::1]"])
# Production refuses a weak or example SECRET_KEY and an empty or wildcard ALLOWED_HOSTS in
# every process, naming each; the web process and the workers then check the accounts too.
_unsafe = unsafe_settings(debug=DEBUG, secret_key=SECRET_KEY, allowed_hosts=ALLOWED_HOSTS)
if _unsafe and not _checking():
    raise ImproperlyConfigured(
        REFUSING + "; ".join(_unsafe) + ". `manage.py check --deploy` lists every problem, "
        "accounts with a demo password included."
    )
CSRF_TRUSTED_ORIGINS = env.list("CSRF_TRUSTED_ORIGINS", default=[])

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "rest_framework.authtoken",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "django_htmx",
    "axes",
    "csp",
    "stimuli",
    "raters",
    "scoring",
]

MIDDLEWARE = [
    # Before anything reads a body: too large a body is refused before it is spooled.
    "foley_platform.limits.BodyLimitMiddleware",
    "django.middleware.security.SecurityMiddleware",
    # django-csp's, with the plain policy built once (foley_platform/middleware.py).
    "foley_platform.middleware.ContentSecurityPolicy",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    # Per-client limits on login, admin, join and crowd links and player events, for sites
    # without the proxy's (deploy/nginx.conf has the same).
    "foley_platform.limits.RateLimitMiddleware",
    "axes.middleware.AxesMiddleware",
    "foley_platform.middleware.method_not_allowed_page",
    "foley_platform.middleware.request_arrival",
]
# nginx in front stamps each request with when it arrived (deploy/nginx.conf's X-Request-Start);
# only then may the listening checks read it, and only from FOLEY_PROXY_ADDRESSES: a browser that
# reaches the web process directly sends what it likes.
PROXY_REQUEST_START = env.bool("PROXY_REQUEST_START", default=False)

ROOT_URLCONF = "foley_platform.urls"
WSGI_APPLICATION = "foley_platform.wsgi.application"
ASGI_APPLICATION = "foley_platform.asgi.application"

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
                "stimuli.permissions.roles",
                "stimuli.submissions.context.team_links",
            ],
        },
    },
]

DATABASES = {
    "default": env.db_url("DATABASE_URL", default=f"sqlite:///{DATA_DIR / 'foley.sqlite3'}"),
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # Concurrent readers (the page polling a job) must not fail while a writer holds the file.
    DATABASES["default"].setdefault("OPTIONS", {}).update(
        {"timeout": 30, "transaction_mode": "IMMEDIATE", "init_command": "PRAGMA journal_mode=WAL;"}
    )
    # Tests on SQLite use a file, as the demo does, never Django's shared-cache in-memory
    # database: its table locks (SQLITE_LOCKED, "database table is locked") ignore the busy
    # timeout, so the live server's threads failed each other under load. One file per process
    # (each test worker makes its own test database).
    DATABASES["default"].setdefault(
        "TEST",
        {"NAME": str(Path(tempfile.gettempdir()) / f"foley-test-{os.getpid()}.sqlite3")},
    )
else:
    DATABASES["default"]["CONN_MAX_AGE"] = env.int("CONN_MAX_AGE", default=60)
    # Off by default: the check is a `SELECT 1` before each request's first query, a round trip
    # on every player event and receipt. Without it a connection the database dropped (a
    # restart) fails one request per worker, which then reconnects; answers are resent with
    # their key and stored once.
    DATABASES["default"]["CONN_HEALTH_CHECKS"] = env.bool("CONN_HEALTH_CHECKS", default=False)
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
# Failed logins (site and admin) lock that username from that address out for a while.
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",
    "django.contrib.auth.backends.ModelBackend",
]
AXES_FAILURE_LIMIT = env.int("AXES_FAILURE_LIMIT", default=5)
AXES_COOLOFF_TIME = env.float("AXES_COOLOFF_HOURS", default=0.25)
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True
AXES_CLIENT_IP_CALLABLE = "foley_platform.limits.client_ip"
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "home"
LOGOUT_REDIRECT_URL = "home"

LANGUAGE_CODE = "en-us"
TIME_ZONE = env("TIME_ZONE", default="UTC")
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = Path(env("STATIC_ROOT", default=str(BASE_DIR / "staticfiles")))
MEDIA_URL = "media/"
MEDIA_ROOT = Path(env("MEDIA_ROOT", default=str(DATA_DIR / "media")))
# Production serves hashed, compressed static files (after collectstatic); development and the
# test suite serve them from the source folders.
STATIC_MANIFEST = env.bool("STATIC_MANIFEST", default=not DEBUG)
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {
        "BACKEND": (
            "whitenoise.storage.CompressedManifestStaticFilesStorage"
            if STATIC_MANIFEST
            else "django.contrib.staticfiles.storage.StaticFilesStorage"
        )
    },
}
WHITENOISE_USE_FINDERS = not STATIC_MANIFEST
# Raters' sounds: empty, Django sends the bytes (the demo, development); a path such as
# "/_sounds/", Django checks the rater's token and answers with X-Accel-Redirect to that internal
# location of the web server in front (nginx), which sends the file from MEDIA_ROOT with ranges
# (deploy/nginx.conf).
AUDIO_ACCEL_REDIRECT = env("AUDIO_ACCEL_REDIRECT", default="")
# Uploads larger than this stream to a temporary file instead of memory.
FILE_UPLOAD_MAX_MEMORY_SIZE = 2 * 1024 * 1024

# --- Request bodies: small everywhere but on the upload paths (foley_platform/limits.py) ---
DATA_UPLOAD_MAX_MEMORY_SIZE = env.int("DATA_UPLOAD_MAX_MEMORY_SIZE", default=1024 * 1024)
FOLEY_BODY_MAX_BYTES = env.int("FOLEY_BODY_MAX_BYTES", default=2 * 1024 * 1024)
# The addresses (or networks) the proxies in front connect from: only a request that comes from
# one of them is believed about its client (X-Forwarded-For), its arrival (X-Request-Start) and a
# sound it sent (the delivery receipt); anyone else is a browser, whatever its headers say.
# Loopback by default (nginx on the same host); docker-compose names nginx's fixed address.
FOLEY_PROXY_ADDRESSES = env.list("FOLEY_PROXY_ADDRESSES", default=["127.0.0.0/8", "::1"])
for _address in FOLEY_PROXY_ADDRESSES:
    try:
        ipaddress.ip_network(_address.strip(), strict=False)
    except ValueError:
        raise ImproperlyConfigured(
            f"FOLEY_PROXY_ADDRESSES: {_address!r} is not an address or network"
        ) from None
# How many proxies in front append to X-Forwarded-For (nginx: 1; a TLS proxy before it that
# appends too: 2, with its address in FOLEY_PROXY_ADDRESSES as nginx sees it); 0 trusts only the
# connection's address. Rate limits and login lockouts count per client.
FOLEY_PROXY_HOPS = env.int("FOLEY_PROXY_HOPS", default=0)
# New crowd participant ids one network (IPv4 /24, IPv6 /64) may bring to a run; 0: no limit.
FOLEY_CROWD_IDS_PER_NETWORK = env.int("FOLEY_CROWD_IDS_PER_NETWORK", default=5)
FOLEY_RATE_LIMITS_ENABLED = env.bool("FOLEY_RATE_LIMITS_ENABLED", default=True)

# --- Uploads: limits that keep a hostile archive from exhausting the machine ---
FOLEY_UPLOAD_MAX_BYTES = env.int("FOLEY_UPLOAD_MAX_BYTES", default=4 * 1024**3)
FOLEY_UPLOAD_MAX_FILES = env.int("FOLEY_UPLOAD_MAX_FILES", default=20_000)
FOLEY_UPLOAD_MAX_EXPANDED_BYTES = env.int("FOLEY_UPLOAD_MAX_EXPANDED_BYTES", default=8 * 1024**3)
FOLEY_UPLOAD_MAX_FILE_BYTES = env.int("FOLEY_UPLOAD_MAX_FILE_BYTES", default=64 * 1024**2)
FOLEY_UPLOAD_MAX_RATIO = env.int("FOLEY_UPLOAD_MAX_RATIO", default=100)
# Submitted generators run in a sandbox with these limits (sandbox/process.py).
FOLEY_SANDBOX_LIMITS = {
    "load_timeout_s": env.float("FOLEY_SANDBOX_LOAD_TIMEOUT_S", default=600.0),
    "call_timeout_s": env.float("FOLEY_SANDBOX_CALL_TIMEOUT_S", default=600.0),
    "memory_mb": env.int("FOLEY_SANDBOX_MEMORY_MB", default=8192),
    "max_processes": env.int("FOLEY_SANDBOX_MAX_PROCESSES", default=256),
    "cpu_s": env.float("FOLEY_SANDBOX_CPU_S", default=0.0) or None,
    "address_space_mb": env.int("FOLEY_SANDBOX_ADDRESS_SPACE_MB", default=32768),
}
FOLEY_GENERATOR_MAX_BYTES = env.int("FOLEY_GENERATOR_MAX_BYTES", default=2 * 1024**3)
# Checked from a generator archive's central directory in the upload request, before unpacking.
FOLEY_GENERATOR_MAX_EXPANDED_BYTES = env.int(
    "FOLEY_GENERATOR_MAX_EXPANDED_BYTES", default=8 * 1024**3
)
FOLEY_GENERATOR_MAX_FILES = env.int("FOLEY_GENERATOR_MAX_FILES", default=10_000)
FOLEY_GENERATOR_MAX_RATIO = env.int("FOLEY_GENERATOR_MAX_RATIO", default=100)
# A running generation job whose heartbeat is older than this has lost its worker: a second
# delivery of its task resumes it (a fresh heartbeat means a live worker: the delivery is dropped).
FOLEY_JOB_STALE_S = env.float("FOLEY_JOB_STALE_S", default=300.0)
# Weights of the built-in embedding models (OpenL3 .h5 or .pth, VGGish .pth), looked up by the
# file names the models' own packages use; they are never downloaded by the platform.
FOLEY_MODEL_DIR = Path(env("FOLEY_MODEL_DIR", default=str(DATA_DIR / "models")))
# Clips per batch through an embedding model: bounds worker memory, whatever the set's size.
FOLEY_EMBED_BATCH = env.int("FOLEY_EMBED_BATCH", default=32)
# The CLAP score of the text-prompt study: a LAION-CLAP checkpoint holding both branches and the
# folder of RoBERTa-base's tokenizer files (vocab.json, merges.txt); empty: under FOLEY_MODEL_DIR.
FOLEY_CLAP_CHECKPOINT = env("FOLEY_CLAP_CHECKPOINT", default="")
FOLEY_CLAP_TOKENIZER = env("FOLEY_CLAP_TOKENIZER", default="")
FOLEY_CLAP_VARIANT = env("FOLEY_CLAP_VARIANT", default="htsat-tiny")
# The learned predictors' released checkpoints (docs/objective.md); empty: under FOLEY_MODEL_DIR.
FOLEY_AESTHETICS_WEIGHTS = env("FOLEY_AESTHETICS_WEIGHTS", default="")
FOLEY_PAM_WEIGHTS = env("FOLEY_PAM_WEIGHTS", default="")
FOLEY_PAM_TOKENIZER = env("FOLEY_PAM_TOKENIZER", default="")

# --- Security: production values unless DEBUG is on ---
SECURE_CONTENT_TYPE_NOSNIFF = True
X_FRAME_OPTIONS = "DENY"
SESSION_COOKIE_HTTPONLY = True
SECURE_REFERRER_POLICY = "same-origin"
if not DEBUG:
    SESSION_COOKIE_SECURE = env.bool("SESSION_COOKIE_SECURE", default=True)
    CSRF_COOKIE_SECURE = env.bool("CSRF_COOKIE_SECURE", default=True)
    SECURE_SSL_REDIRECT = env.bool("SECURE_SSL_REDIRECT", default=True)
    SECURE_HSTS_SECONDS = env.int("SECURE_HSTS_SECONDS", default=31_536_000)
    SECURE_HSTS_INCLUDE_SUBDOMAINS = env.bool("SECURE_HSTS_INCLUDE_SUBDOMAINS", default=True)
    SECURE_HSTS_PRELOAD = env.bool("SECURE_HSTS_PRELOAD", default=False)
    if not SECURE_HSTS_PRELOAD:
        # Joining the browsers' preload list binds the whole domain for months: the operator's
        # decision, so its absence is not reported as a problem.
        SILENCED_SYSTEM_CHECKS = ["security.W021"]
    if env.bool("BEHIND_TLS_PROXY", default=False):
        SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")

# Rate limits count in the cache: one shared by every web process where there are several
# (CACHE_URL, e.g. redis://redis:6379/1), else this process's memory.
CACHES = {"default": env.cache_url("CACHE_URL", default="locmemcache://")}

# Content-Security-Policy on every response: the platform's own scripts only (the one inline
# script carries the request's nonce); inline styles stay allowed for the SVG plots matplotlib
# draws with style attributes.
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": [SELF],
        "script-src": [SELF, NONCE],
        "style-src": [SELF, "'unsafe-inline'"],
        "img-src": [SELF, "data:"],
        "media-src": [SELF, "blob:"],
        "connect-src": [SELF],
        "font-src": [SELF],
        "object-src": [NONE],
        "base-uri": [SELF],
        "form-action": [SELF],
        "frame-ancestors": [NONE],
    }
}

# The API's schema and its browsable docs: organizers only unless opened to everyone.
FOLEY_PUBLIC_API_DOCS = env.bool("FOLEY_PUBLIC_API_DOCS", default=False)

# --- E-mail: password resets and the teams' notifications ---
# The console in development and the demo; SMTP (EMAIL_HOST...) in production.
EMAIL_BACKEND = env("EMAIL_BACKEND", default="django.core.mail.backends.console.EmailBackend")
EMAIL_HOST = env("EMAIL_HOST", default="localhost")
EMAIL_PORT = env.int("EMAIL_PORT", default=25)
EMAIL_HOST_USER = env("EMAIL_HOST_USER", default="")
EMAIL_HOST_PASSWORD = env("EMAIL_HOST_PASSWORD", default="")
EMAIL_USE_TLS = env.bool("EMAIL_USE_TLS", default=False)
DEFAULT_FROM_EMAIL = env("DEFAULT_FROM_EMAIL", default="foley@localhost")
# The site's own address (scheme and host, e.g. https://foley.example.org): every link in an
# e-mail (password reset, sign-up confirmation) and every invitation link starts with it, never
# with the Host header a request claims, which an attacker chooses.
FOLEY_SITE_URL = env("FOLEY_SITE_URL", default="http://localhost:8000").rstrip("/")

# --- REST API ---
REST_FRAMEWORK = {
    # Session first: a request with no credentials gets 403, as the API promises.
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "rest_framework.authentication.SessionAuthentication",
        "rest_framework.authentication.TokenAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["stimuli.permissions.IsOrganizer"],
    # DRF's JSON parser, but a body nested too deep for Python's parser is a 400 like bad JSON.
    "DEFAULT_PARSER_CLASSES": [
        "stimuli.parsers.JSONParser",
        "rest_framework.parsers.FormParser",
        "rest_framework.parsers.MultiPartParser",
    ],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    # Services raise stimuli.errors.Refused; one handler answers it with its status.
    "EXCEPTION_HANDLER": "foley_platform.api_errors.exception_handler",
    "DEFAULT_PAGINATION_CLASS": "rest_framework.pagination.LimitOffsetPagination",
    "PAGE_SIZE": 100,
}
SPECTACULAR_SETTINGS = {
    "TITLE": "Foley evaluation platform API",
    "DESCRIPTION": "Challenges, reference sets, systems, jobs, listening tests and leaderboards.",
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
}

# --- Celery: no broker means tasks run in-process, so a bare machine needs no services ---
CELERY_BROKER_URL = env("CELERY_BROKER_URL", default="")
CELERY_TASK_ALWAYS_EAGER = not CELERY_BROKER_URL
# Without a broker, a job started from a page runs on a thread of the web process, so that the
# page answers at once and shows the job's progress (the demo's server sets it); commands and
# tests leave it off and get their jobs back finished.
FOLEY_TASKS_IN_BACKGROUND = env.bool("FOLEY_TASKS_IN_BACKGROUND", default=False)
CELERY_TASK_EAGER_PROPAGATES = True
CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
# Each job's task goes to the queue its kind declares (stimuli/job_kinds.py): `gpu` for what
# wants a GPU or runs submitted code; anything else to `cpu`.
CELERY_TASK_DEFAULT_QUEUE = "cpu"
CELERY_TASK_ROUTES = ("stimuli.job_kinds.route",)
# What the scheduler (`celery beat`, the compose file's `scheduler`) sends: teams are reminded of
# a deadline a day ahead; hourly, and each team once per deadline however often it runs.
CELERY_BEAT_SCHEDULE = {
    "remind-deadlines": {"task": "stimuli.tasks.remind_deadlines", "schedule": 3600.0},
}
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_BROKER_TRANSPORT_OPTIONS = {
    # A message whose worker died unacknowledged is delivered again after this many seconds.
    "visibility_timeout": env.int("CELERY_VISIBILITY_TIMEOUT", default=3600),
    "global_keyprefix": env("CELERY_KEY_PREFIX", default=""),
    # How often a worker looks for such messages: every interval x throttle seconds (100 s).
    "unacked_restore_interval": env.int("CELERY_RESTORE_INTERVAL", default=10),
    "unacked_restore_throttle": env.int("CELERY_RESTORE_THROTTLE", default=10),
}
CELERY_WORKER_HIJACK_ROOT_LOGGER = False

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": env("LOG_LEVEL", default="INFO")},
    "loggers": {"django.db.backends": {"level": "WARNING"}},
}
