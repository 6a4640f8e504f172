"""`python -m blobviewer.serve_preflight`: the first step of `make serve`.

It reads the environment the production server will run with and refuses, with one line
on stderr and exit status 2, before anything touches the database or the data folder:
DEBUG on (including unset: the settings' development default is on), no SECRET_KEY, no
ALLOWED_HOSTS, or gunicorn settings that are not numbers. Django is not imported: the
settings module itself raises on some of these, with a traceback rather than a line.

`server_settings()` is also what blobviewer/gunicorn.conf.py reads, so the check and the
server agree on what the environment means.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass

from core.store.errors import BlobStoreError
from core.store.s3.client import client_limits

# The same words as blobviewer.settings._env_bool.
_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")

DEFAULT_PORT = 8000
DEFAULT_WORKERS = 2
DEFAULT_THREADS = 4


class PreflightError(Exception):
    """The environment cannot run the production server; the message says what to set."""


@dataclass(frozen=True)
class ServerSettings:
    """How gunicorn listens and how many requests it serves at once (workers x threads)."""

    bind: str
    workers: int
    threads: int


def _positive_int(env: Mapping[str, str], name: str, default: int, *, most: int) -> int:
    value = env.get(name, "").strip()
    if not value:
        return default
    try:
        number = int(value)
    except ValueError:
        raise PreflightError(f"{name} must be a whole number, got {value!r}") from None
    if not 1 <= number <= most:
        raise PreflightError(f"{name} must be between 1 and {most}, got {number}")
    return number


def server_settings(env: Mapping[str, str]) -> ServerSettings:
    """gunicorn's settings from `env`: BIND (e.g. `0.0.0.0:8000` or `unix:/run/bv.sock`)
    or else 127.0.0.1:PORT (default 8000), WEB_CONCURRENCY worker processes (default 2)
    and GUNICORN_THREADS threads in each (default 4). Raises PreflightError."""
    port = _positive_int(env, "PORT", DEFAULT_PORT, most=65535)
    bind = env.get("BIND", "").strip() or f"127.0.0.1:{port}"
    workers = _positive_int(env, "WEB_CONCURRENCY", DEFAULT_WORKERS, most=64)
    threads = _positive_int(env, "GUNICORN_THREADS", DEFAULT_THREADS, most=256)
    return ServerSettings(bind=bind, workers=workers, threads=threads)


def check(env: Mapping[str, str]) -> ServerSettings:
    """Everything `make serve` needs from `env`, or PreflightError naming what is missing."""
    debug = env.get("DEBUG", "").strip().lower()
    if debug in _TRUE or debug == "":
        raise PreflightError(
            "DEBUG is on (its default): set DEBUG=false to serve a team; "
            "debug pages show settings and code to anyone"
        )
    if debug not in _FALSE:
        raise PreflightError(f"DEBUG must be true or false, got {env['DEBUG']!r}")
    if not env.get("SECRET_KEY", "").strip():
        raise PreflightError(
            "SECRET_KEY is not set: set it to a long random string and keep it secret, e.g. "
            "python3 -c 'import secrets; print(secrets.token_urlsafe(50))'"
        )
    if not [host for host in env.get("ALLOWED_HOSTS", "").split(",") if host.strip()]:
        raise PreflightError(
            "ALLOWED_HOSTS is not set: set it to the host names people reach the site by, "
            "e.g. ALLOWED_HOSTS=blobs.example.com"
        )
    try:
        client_limits(env)  # the object store's timeouts, tries and turns
    except BlobStoreError as error:
        raise PreflightError(str(error)) from None
    return server_settings(env)


def preflight() -> int:
    """`python -m blobviewer.serve_preflight`: the exit status, 0 when the server may start."""
    try:
        settings = check(os.environ)
    except PreflightError as error:
        print(f"make serve: refusing to start: {error}", file=sys.stderr)
        return 2
    print(
        f"make serve: gunicorn on {settings.bind}, {settings.workers} workers "
        f"x {settings.threads} threads"
    )
    return 0


if __name__ == "__main__":
    sys.exit(preflight())
