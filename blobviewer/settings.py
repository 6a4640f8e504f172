"""Settings for blobviewer, read from the environment with safe development defaults.

Check out the code, install requirements.txt, run `manage.py runserver` and it works:
DEBUG is on, the data (blobs, session logs, SQLite) lives in ./data. A production
deployment sets DEBUG=false, SECRET_KEY, ALLOWED_HOSTS and usually DATABASE_URL;
`manage.py check --deploy` is then clean.
"""

from __future__ import annotations

import os
from datetime import timedelta
from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

BASE_DIR = Path(__file__).resolve().parent.parent


def _env_bool(name: str, default: bool) -> bool:
    value = os.environ.get(name)
    if value is None or value.strip() == "":
        return default
    if value.strip().lower() in ("1", "true", "yes", "on"):
        return True
    if value.strip().lower() in ("0", "false", "no", "off"):
        return False
    raise ImproperlyConfigured(f"{name} must be true or false, got {value!r}")


def _env_int(name: str, default: int) -> int:
    value = os.environ.get(name, "").strip()
    if not value:
        return default
    try:
        return int(value)
    except ValueError:
        raise ImproperlyConfigured(f"{name} must be an integer, got {value!r}") from None


def _env_list(name: str, default: list[str]) -> list[str]:
    value = os.environ.get(name)
    if value is None:
        return default
    return [part.strip() for part in value.split(",") if part.strip()]


DEBUG = _env_bool("DEBUG", True)

# The one data directory: blobs/ (the FsBlobStore agents write), sessions/ (session
# logs) and, unless DATABASE_URL says otherwise, the SQLite database.
BLOBVIEWER_DATA = Path(os.environ.get("BLOBVIEWER_DATA") or BASE_DIR / "data").resolve()

# Where blobs, their indexes, renderings and uploaded session logs live: empty for the
# data directory's own folders, or `s3://bucket/prefix` for an S3-compatible object store
# that several servers share (boto3 reads AWS_ENDPOINT_URL, AWS_ACCESS_KEY_ID,
# AWS_SECRET_ACCESS_KEY and AWS_REGION itself). See blobviewer/data_dir.py.
BLOBVIEWER_BLOBS = os.environ.get("BLOBVIEWER_BLOBS", "").strip()
if BLOBVIEWER_BLOBS and not BLOBVIEWER_BLOBS.startswith("s3://"):
    raise ImproperlyConfigured(
        f"BLOBVIEWER_BLOBS must be empty (the blobs/ folder in BLOBVIEWER_DATA) or "
        f"s3://bucket/prefix, got {BLOBVIEWER_BLOBS!r}"
    )
if BLOBVIEWER_BLOBS:
    from core.store.errors import BlobStoreError
    from core.store.s3 import parse_s3_url  # boto3 is imported only when a store is made
    from core.store.s3.client import client_limits

    try:
        parse_s3_url(BLOBVIEWER_BLOBS)
        client_limits(os.environ)  # BLOBVIEWER_S3_*: the timeouts, tries and turns
    except BlobStoreError as error:
        raise ImproperlyConfigured(f"BLOBVIEWER_BLOBS: {error}") from None

SECRET_KEY = os.environ.get("SECRET_KEY", "")
if not SECRET_KEY:
    if not DEBUG:
        raise ImproperlyConfigured("SECRET_KEY must be set when DEBUG is false")
    SECRET_KEY = "django-insecure-dev-only-key-never-use-in-production-0123456789"

ALLOWED_HOSTS = _env_list("ALLOWED_HOSTS", ["localhost", "127.0.0.1", "[::1]"] if DEBUG else [])
CSRF_TRUSTED_ORIGINS = _env_list("CSRF_TRUSTED_ORIGINS", [])

INSTALLED_APPS = [
    "blobviewer",
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.humanize",
    # Before staticfiles, so runserver serves static files the way production does.
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "django_htmx",
    "template_partials",
    # Failed logins, kept in the database so every server process sees them
    # (docs/team.md#login-throttling).
    "axes",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "blobviewer.middleware.ContentSecurityPolicyMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    # Every page needs a login unless its view is marked @login_not_required.
    "django.contrib.auth.middleware.LoginRequiredMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    "blobviewer.middleware.StoreUnavailableMiddleware",
    # Last, as axes requires: it turns a locked-out login into the 429 page.
    "axes.middleware.AxesMiddleware",
]

ROOT_URLCONF = "blobviewer.urls"
WSGI_APPLICATION = "blobviewer.wsgi.application"

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
            ],
        },
    },
]

# SQLite in the data directory unless DATABASE_URL names another database
# (PostgreSQL for a shared team server).
DATABASE_URL = os.environ.get("DATABASE_URL", "").strip()
if not DATABASE_URL:
    # SQLite creates the file but not its directory; this keeps `runserver` working
    # on a fresh checkout.
    BLOBVIEWER_DATA.mkdir(parents=True, exist_ok=True)
    DATABASE_URL = f"sqlite:///{BLOBVIEWER_DATA / 'db.sqlite3'}"
# A connection outlives its request (each of gunicorn's threads keeps one), checked before
# a request reuses it: opening one costs a PostgreSQL server 3 ms and more, and its first
# statements are planned with cold caches (docs/team.md#database).
DATABASES = {
    "default": dj_database_url.parse(
        DATABASE_URL, conn_max_age=_env_int("CONN_MAX_AGE", 60), conn_health_checks=True
    )
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # Write-ahead log: pages read while ingest writes, and a commit appends to the log
    # instead of rewriting the file; with synchronous=NORMAL a commit does not wait for
    # the disk (the database stays consistent; a power cut may lose the last commits,
    # which ingesting again brings back).
    DATABASES["default"].setdefault("OPTIONS", {})["init_command"] = (
        "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL"
    )
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
# Axes first: it refuses a locked-out username+address before any password is checked.
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",
    "django.contrib.auth.backends.ModelBackend",
]
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "session_list"
LOGOUT_REDIRECT_URL = "login"

LANGUAGE_CODE = "en-us"
TIME_ZONE = os.environ.get("TIME_ZONE", "UTC")
USE_I18N = False
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
# Where collectstatic gathers files for production; while developing, files are served
# from STATICFILES_DIRS directly (and WhiteNoise would warn about a missing directory).
STATIC_ROOT = os.environ.get("STATIC_ROOT") or (None if DEBUG else BASE_DIR / "staticfiles")
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    # Hashed, compressed files in production (after collectstatic); plain files while
    # developing, so nothing has to be collected first.
    "staticfiles": {
        "BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"
        if DEBUG
        else "whitenoise.storage.CompressedManifestStaticFilesStorage"
    },
}

# --- security --------------------------------------------------------------------------
# Production (DEBUG=false) gets HTTPS-only cookies, HSTS and an HTTPS redirect; each can be
# turned off from the environment, e.g. SECURE_SSL_REDIRECT=false behind a proxy that
# already redirects.
SECURE_SSL_REDIRECT = _env_bool("SECURE_SSL_REDIRECT", not DEBUG)
SESSION_COOKIE_SECURE = _env_bool("SESSION_COOKIE_SECURE", not DEBUG)
CSRF_COOKIE_SECURE = _env_bool("CSRF_COOKIE_SECURE", not DEBUG)
SECURE_HSTS_SECONDS = _env_int("SECURE_HSTS_SECONDS", 0 if DEBUG else 31_536_000)
SECURE_HSTS_INCLUDE_SUBDOMAINS = _env_bool("SECURE_HSTS_INCLUDE_SUBDOMAINS", not DEBUG)
SECURE_HSTS_PRELOAD = _env_bool("SECURE_HSTS_PRELOAD", not DEBUG)
if _env_bool("SECURE_PROXY_SSL_HEADER", False):
    # Only behind a proxy that sets X-Forwarded-Proto itself; otherwise clients could.
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
SESSION_COOKIE_HTTPONLY = True
X_FRAME_OPTIONS = "DENY"

# --- login throttling (django-axes) ----------------------------------------------------
# Both login forms (/accounts/login/, /admin/login/) lock a username *from one address*
# after BLOBVIEWER_LOGIN_FAILURE_LIMIT failed tries, for BLOBVIEWER_LOGIN_COOLOFF_MINUTES
# after the last one, answering 429 with a page (blobviewer/login_lockout.py). Another
# address or another username is not locked, so a guesser cannot lock a teammate out of
# the site. `manage.py axes_reset` unlocks everyone at once.
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_FAILURE_LIMIT = _env_int("BLOBVIEWER_LOGIN_FAILURE_LIMIT", 5)
_login_cooloff_minutes = _env_int("BLOBVIEWER_LOGIN_COOLOFF_MINUTES", 15)
if AXES_FAILURE_LIMIT < 1 or _login_cooloff_minutes < 1:
    # 0 would mean "lock at once" or "never lock"; neither is a throttle.
    raise ImproperlyConfigured(
        "BLOBVIEWER_LOGIN_FAILURE_LIMIT and BLOBVIEWER_LOGIN_COOLOFF_MINUTES must be at least 1"
    )
AXES_COOLOFF_TIME = timedelta(minutes=_login_cooloff_minutes)
AXES_RESET_ON_SUCCESS = True  # a typo or two before a good login is forgotten
AXES_LOCKOUT_CALLABLE = "blobviewer.team.login_lockout.lockout_response"
# The client's address: REMOTE_ADDR, unless BLOBVIEWER_PROXY_COUNT says how many proxies
# in front of the site append to X-Forwarded-For (see blobviewer/client_address.py).
AXES_CLIENT_IP_CALLABLE = "blobviewer.team.client_address.client_address"
BLOBVIEWER_PROXY_COUNT = _env_int("BLOBVIEWER_PROXY_COUNT", 0)

# Blob and session content is untrusted, so no page may run inline script.
CONTENT_SECURITY_POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "frame-ancestors 'none'; base-uri 'self'; form-action 'self'"
)

# --- the site --------------------------------------------------------------------------
SHARE_LINK_DAYS = _env_int("SHARE_LINK_DAYS", 7)

# POST /api/sessions: the most bytes one upload (a session log and its blobs) may have.
# The view streams a raw log to a file, so Django's DATA_UPLOAD_MAX_MEMORY_SIZE (2.5 MB,
# for form fields held in memory) stays as it is for every other page.
BLOBVIEWER_UPLOAD_MAX_BYTES = _env_int("BLOBVIEWER_UPLOAD_MAX_BYTES", 50 * 1024 * 1024)
# POST /v1/traces and /v1/logs: export requests a token may send a minute, counted in the
# database for every server process (blobviewer.otlp.flood); 0: no limit.
BLOBVIEWER_OTLP_REQUESTS_PER_MINUTE = _env_int("BLOBVIEWER_OTLP_REQUESTS_PER_MINUTE", 600)
# A multipart upload carries one file per blob; Django's default of 100 files would cut
# off a long session. The byte limit above still bounds the whole upload.
DATA_UPLOAD_MAX_NUMBER_FILES = _env_int("BLOBVIEWER_UPLOAD_MAX_FILES", 1000)

# Search sees inside each blob up to this many bytes of its text (JSON: as indented on its
# page); a longer blob's page says that search sees only its beginning (blobviewer.search.indexing).
BLOBVIEWER_SEARCH_BLOB_BYTES = _env_int("BLOBVIEWER_SEARCH_BLOB_BYTES", 4 * 1024 * 1024)

# Expensive selector evaluations (a grep: step, or any selector on a blob over
# BLOBVIEWER_EXPENSIVE_BYTES) run at most BLOBVIEWER_EXPENSIVE_CONCURRENCY at a time across
# all worker processes; another waits up to BLOBVIEWER_EXPENSIVE_WAIT_SECONDS for a turn,
# then gets 429 (blobviewer/expensive.py).
BLOBVIEWER_EXPENSIVE_BYTES = _env_int("BLOBVIEWER_EXPENSIVE_BYTES", 10 * 1024 * 1024)
BLOBVIEWER_EXPENSIVE_CONCURRENCY = _env_int("BLOBVIEWER_EXPENSIVE_CONCURRENCY", 2)
BLOBVIEWER_EXPENSIVE_WAIT_SECONDS = _env_int("BLOBVIEWER_EXPENSIVE_WAIT_SECONDS", 2)
if BLOBVIEWER_EXPENSIVE_CONCURRENCY < 1 or BLOBVIEWER_EXPENSIVE_WAIT_SECONDS < 0:
    raise ImproperlyConfigured(
        "BLOBVIEWER_EXPENSIVE_CONCURRENCY must be at least 1 and "
        "BLOBVIEWER_EXPENSIVE_WAIT_SECONDS at least 0"
    )

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": "WARNING"},
}
