"""`make serve` started as a team runs it, for the tests: behind a simulated HTTPS proxy.

The server is `make serve` itself (preflight, migrate, collectstatic, blobs gc, blobs index, check
--deploy, gunicorn with blobviewer/gunicorn.conf.py) in its own process group, on a free
loopback port, on a database of its own on the test run's kind of server: a temporary
SQLite file, or with DATABASE_URL a fresh PostgreSQL database created and dropped here.
Requests carry what a proxy in front of it would add: the public Host and
X-Forwarded-Proto: https.
"""

from __future__ import annotations

import os
import re
import secrets
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import SplitResult, urlsplit, urlunsplit

import httpx
import psycopg
import pytest
from psycopg import sql

ROOT = Path(__file__).resolve().parents[2]
HOST = "blobs.example.test"
PASSWORD = "correct-horse-battery"
FAILURE_LIMIT = 2  # each failure hashes a password: a low limit keeps the test short
# Only to give up on a server that never comes up, instead of hanging the run.
START_DEADLINE_SECONDS = 120

# Variables of the test run that must not leak into the server: Django's, ours, gunicorn's
# and those of an outer `make test` (a sub-make would look for its jobserver).
LEAKY = ("DEBUG", "SECRET_KEY", "ALLOWED_HOSTS", "DJANGO_", "BLOBVIEWER_", "STATIC_ROOT")
LEAKY += ("PORT", "BIND", "WEB_CONCURRENCY", "GUNICORN_", "FORWARDED_ALLOW_IPS")
LEAKY += ("MAKEFLAGS", "MFLAGS", "MAKELEVEL", "SECURE_", "CSRF_", "SESSION_COOKIE_")


@contextmanager
def own_database(tmp_path: Path) -> Iterator[str]:
    """A DATABASE_URL for the server, empty until `make serve` migrates it."""
    url = os.environ.get("DATABASE_URL", "").strip()
    if not url:
        yield f"sqlite:///{tmp_path / 'server.sqlite3'}"
        return
    parts = urlsplit(url)
    if parts.scheme not in ("postgres", "postgresql", "pgsql"):
        pytest.fail(f"the production server test knows SQLite and PostgreSQL, not {url!r}")
    name = f"{parts.path.lstrip('/') or 'blobviewer'}_serve_{uuid.uuid4().hex[:8]}"
    server_url = urlunsplit(parts._replace(scheme="postgresql", path=f"/{name}"))
    with maintenance_connection(parts) as connection:
        connection.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    try:
        yield server_url
    finally:
        with maintenance_connection(parts) as connection:
            connection.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )


def maintenance_connection(parts: SplitResult) -> psycopg.Connection:
    """A connection to create and drop databases with: to DATABASE_URL's own database, or
    to `postgres` when that one does not exist (pytest-django needs only the server)."""
    try:
        return psycopg.connect(urlunsplit(parts._replace(scheme="postgresql")), autocommit=True)
    except psycopg.OperationalError:
        url = urlunsplit(parts._replace(scheme="postgresql", path="/postgres"))
        return psycopg.connect(url, autocommit=True)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@dataclass
class Server:
    url: str
    env: dict[str, str]
    data: Path
    process: subprocess.Popen[bytes]
    log: Path

    def output(self) -> str:
        return self.log.read_text(errors="replace")[-4000:]


def production_env(tmp_path: Path, *, database_url: str, port: int) -> dict[str, str]:
    """What an operator exports before `make serve` behind an HTTPS proxy
    (docs/team.md#run-it-for-a-team)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(LEAKY)}
    env.update(
        {
            "DEBUG": "false",
            "SECRET_KEY": secrets.token_urlsafe(50),
            "ALLOWED_HOSTS": HOST,
            "DATABASE_URL": database_url,
            "BLOBVIEWER_DATA": str(tmp_path / "server-data"),
            "STATIC_ROOT": str(tmp_path / "static"),
            "SECURE_PROXY_SSL_HEADER": "true",
            "BLOBVIEWER_LOGIN_FAILURE_LIMIT": str(FAILURE_LIMIT),
            "BIND": f"127.0.0.1:{port}",
            "WEB_CONCURRENCY": "2",
            "GUNICORN_THREADS": "2",
        }
    )
    return env


# PY: this run's interpreter (the venv's, under `make test`); `-o venv`: never reinstall
# requirements from inside a test.
MAKE_SERVE = ["make", "--no-print-directory", "-o", "venv", "serve", f"PY={sys.executable}"]


@contextmanager
def serving(tmp_path: Path, database_url: str, **extra_env: str) -> Iterator[Server]:
    """`make serve` under production_env and *extra_env*, listening; stopped after."""
    port = free_port()
    env = {**production_env(tmp_path, database_url=database_url, port=port), **extra_env}
    data = Path(env["BLOBVIEWER_DATA"])
    log = tmp_path / "serve.log"
    server = Server(f"http://127.0.0.1:{port}", env, data, launch(env, log), log)
    try:
        wait_until_listening(server, port)
        yield server
    finally:
        stop(server.process)


def launch(env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    """`make serve` with *env*, its output appended to *log*."""
    with log.open("ab") as out:
        return subprocess.Popen(
            MAKE_SERVE,
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,  # its own process group: make, gunicorn and workers
        )


def restart(server: Server) -> None:
    """Start *server* again (after stop), on the same port, data and database."""
    server.process = launch(server.env, server.log)
    wait_until_listening(server, int(server.url.rsplit(":", 1)[1]))


def wait_until_listening(server: Server, port: int) -> None:
    deadline = time.monotonic() + START_DEADLINE_SECONDS
    while time.monotonic() < deadline:
        if server.process.poll() is not None:
            pytest.fail(f"make serve exited with {server.process.returncode}:\n{server.output()}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError:
            time.sleep(0.1)
    pytest.fail(f"make serve did not listen on {port}:\n{server.output()}")


def stop(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM to the server's process group (gunicorn shuts down gracefully), then
    SIGKILL if it is still there after a while."""
    try:
        os.killpg(process.pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    try:
        process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
    # gunicorn's workers are in the same group; make sure none outlived the master.
    for _ in range(50):
        try:
            os.killpg(process.pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.1)
    os.killpg(process.pid, signal.SIGKILL)


def manage(server: Server, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env={**server.env, **env},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


class Browser:
    """Requests as a browser sends them through the HTTPS proxy: the public Host, the
    proxy's X-Forwarded-Proto, and cookies kept by hand (they are Secure, and this leg of
    the trip is plain HTTP)."""

    def __init__(self, server: Server) -> None:
        self.base = server.url
        self.cookies: dict[str, str] = {}

    def request(self, method: str, path: str, *, proxied: bool = True, **kwargs) -> httpx.Response:
        headers = {"Host": HOST, **kwargs.pop("headers", {})}
        if proxied:
            headers["X-Forwarded-Proto"] = "https"
        if self.cookies:
            headers["Cookie"] = "; ".join(f"{k}={v}" for k, v in self.cookies.items())
        response = httpx.request(
            method, self.base + path, headers=headers, follow_redirects=False, timeout=60, **kwargs
        )
        for header in response.headers.get_list("set-cookie"):
            name, _, rest = header.partition("=")
            self.cookies[name] = rest.split(";", 1)[0]
        return response

    def log_in(self, username: str, password: str) -> httpx.Response:
        form = self.request("GET", "/accounts/login/")
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', form.text).group(1)
        return self.request(
            "POST",
            "/accounts/login/",
            data={"csrfmiddlewaretoken": token, "username": username, "password": password},
            headers={"Origin": f"https://{HOST}", "Referer": f"https://{HOST}/accounts/login/"},
        )


def create_superuser(server: Server, username: str = "alice") -> None:
    """An account on *server*, with PASSWORD, as `manage.py createsuperuser` makes one."""
    created = manage(
        server,
        "createsuperuser",
        "--no-input",
        f"--username={username}",
        f"--email={username}@example.test",
        DJANGO_SUPERUSER_PASSWORD=PASSWORD,
    )
    assert created.returncode == 0, created.stderr
