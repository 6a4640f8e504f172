"""`make serve`: the production server as a team runs it, behind a simulated HTTPS proxy.

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
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import SplitResult, urlsplit, urlunsplit

import httpx
import psycopg
import pytest
from psycopg import sql

from core.content import Text
from core.store import FsBlobStore

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


@pytest.fixture
def server_database(tmp_path: Path) -> Iterator[str]:
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


@pytest.fixture
def server(tmp_path: Path, server_database: str) -> Iterator[Server]:
    port = free_port()
    env = production_env(tmp_path, database_url=server_database, port=port)
    data = Path(env["BLOBVIEWER_DATA"])
    log = tmp_path / "serve.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            MAKE_SERVE,
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,  # its own process group: make, gunicorn and workers
        )
    server = Server(f"http://127.0.0.1:{port}", env, data, process, log)
    try:
        wait_until_listening(server, port)
        yield server
    finally:
        stop(process)


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


def test_make_serve_runs_gunicorn_behind_an_https_proxy(server: Server):
    blob = FsBlobStore(server.data / "blobs").store_sync(
        Text("".join(f"line {n}: served by gunicorn\n" for n in range(1, 200)))
    )
    created = manage(
        server,
        "createsuperuser",
        "--no-input",
        "--username",
        "alice",
        "--email",
        "alice@example.test",
        DJANGO_SUPERUSER_PASSWORD=PASSWORD,
    )
    assert created.returncode == 0, created.stderr
    browser = Browser(server)

    # Without the proxy's header the request is plain HTTP, and production redirects it.
    plain = browser.request("GET", "/accounts/login/", proxied=False)
    assert plain.status_code == 301
    assert plain.headers["Location"] == f"https://{HOST}/accounts/login/"

    # Through the proxy: HTTPS as far as Django knows, with its production headers.
    page = browser.request("GET", "/accounts/login/")
    assert page.status_code == 200, server.output()
    assert "max-age=31536000" in page.headers["Strict-Transport-Security"]
    stylesheet = re.search(r'href="(/static/css/site\.[0-9a-f]{12}\.css)"', page.text)
    assert stylesheet, page.text[:2000]

    css = browser.request("GET", stylesheet.group(1))
    assert css.status_code == 200
    assert css.headers["Content-Type"].startswith("text/css")
    assert "immutable" in css.headers["Cache-Control"]  # WhiteNoise's hashed-file answer
    collected = Path(server.env["STATIC_ROOT"]) / stylesheet.group(1).removeprefix("/static/")
    assert css.content == collected.read_bytes()

    # Login throttling is in the path, counted in the database across both workers.
    for _ in range(FAILURE_LIMIT - 1):
        assert browser.log_in("mallory", "guess").status_code == 200
    locked = browser.log_in("mallory", "guess")
    assert locked.status_code == 429
    assert "Too many failed logins" in locked.text

    logged_in = browser.log_in("alice", PASSWORD)
    assert logged_in.status_code == 302, logged_in.text[:2000]
    assert logged_in.headers["Location"] == "/"
    session_cookie = next(
        c for c in logged_in.headers.get_list("set-cookie") if c.startswith("sessionid=")
    )
    assert "Secure" in session_cookie
    assert "HttpOnly" in session_cookie

    blob_page = browser.request("GET", f"/blobs/{blob}/")
    assert blob_page.status_code == 200, blob_page.text[:2000]
    assert "line 2: served by gunicorn" in blob_page.text
    assert "Content-Security-Policy" in blob_page.headers

    # make stops at the first step that fails, so each step ran, in this order.
    log = server.log.read_text(errors="replace")
    steps = [
        "-m blobviewer.serve_preflight",
        "manage.py migrate",
        "manage.py collectstatic",
        "manage.py blobs gc",
        "manage.py blobs index",
        "manage.py check --deploy",
        "-m gunicorn --config blobviewer/gunicorn.conf.py",
        "Using worker: gthread",
    ]
    assert [step for step in steps if step in log] == steps, log
    positions = [log.index(step) for step in steps]
    assert positions == sorted(positions), log
    assert "System check identified no issues" in log


# --- what make serve refuses, and how it configures gunicorn ---------------------------


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"DEBUG": None}, "DEBUG is on (its default): set DEBUG=false"),
        ({"DEBUG": "true"}, "DEBUG is on (its default): set DEBUG=false"),
        ({"DEBUG": "nope"}, "DEBUG must be true or false, got 'nope'"),
        ({"SECRET_KEY": ""}, "SECRET_KEY is not set"),
        ({"SECRET_KEY": None}, "SECRET_KEY is not set"),
        ({"ALLOWED_HOSTS": " , "}, "ALLOWED_HOSTS is not set"),
        ({"WEB_CONCURRENCY": "many"}, "WEB_CONCURRENCY must be a whole number, got 'many'"),
        ({"GUNICORN_THREADS": "0"}, "GUNICORN_THREADS must be between 1 and 256, got 0"),
        ({"BIND": "", "PORT": "http"}, "PORT must be a whole number, got 'http'"),
    ],
)
def test_make_serve_refuses_a_bad_environment_in_one_line_before_anything_runs(
    tmp_path, change, message
):
    database = tmp_path / "server.sqlite3"
    env = production_env(tmp_path, database_url=f"sqlite:///{database}", port=free_port())
    for name, value in change.items():
        if value is None:
            del env[name]
        else:
            env[name] = value

    result = subprocess.run(
        MAKE_SERVE, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120, check=False
    )

    assert result.returncode != 0
    refusal = [line for line in result.stderr.splitlines() if "refusing" in line]
    assert len(refusal) == 1, result.stderr
    assert refusal[0].startswith(f"make serve: refusing to start: {message}")
    assert "manage.py" not in result.stdout  # no later step was started
    assert not database.exists()
    assert not (tmp_path / "server-data").exists()
    assert not (tmp_path / "static").exists()


def test_check_deploy_is_clean_under_make_serves_settings(tmp_path):
    env = production_env(
        tmp_path, database_url=f"sqlite:///{tmp_path / 'db.sqlite3'}", port=free_port()
    )

    result = subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )

    assert result.returncode == 0, result.stdout + result.stderr
    assert "System check identified no issues (0 silenced)." in result.stdout


def gunicorn_config(**env: str) -> dict[str, str]:
    """The settings gunicorn resolves from blobviewer/gunicorn.conf.py under `env`, read
    from a directory elsewhere, as systemd might start it."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith(LEAKY)}
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "gunicorn",
            "--config",
            str(ROOT / "blobviewer" / "gunicorn.conf.py"),
            "--print-config",
        ],
        cwd="/",
        env={**clean, **env},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    pairs = (line.split("=", 1) for line in result.stdout.splitlines() if "=" in line)
    return {name.strip(): value.strip() for name, value in pairs}


def test_gunicorn_runs_gthread_workers_on_loopback_by_default():
    config = gunicorn_config()

    assert config["worker_class"] == "gthread"
    assert config["workers"] == "2"
    assert config["threads"] == "4"
    assert config["bind"] == "['127.0.0.1:8000']"
    assert config["wsgi_app"] == "blobviewer.wsgi:application"
    assert config["chdir"] == str(ROOT)
    assert config["control_socket_disable"] == "True"


def test_gunicorn_takes_workers_threads_and_address_from_the_environment():
    assert gunicorn_config(PORT="8123")["bind"] == "['127.0.0.1:8123']"

    config = gunicorn_config(
        WEB_CONCURRENCY="3", GUNICORN_THREADS="8", PORT="8123", BIND="0.0.0.0:9000"
    )

    assert config["workers"] == "3"
    assert config["threads"] == "8"
    assert config["bind"] == "['0.0.0.0:9000']"


def test_the_readme_names_every_environment_variable_the_site_reads():
    readme = (ROOT / "docs" / "team.md").read_text()
    start = readme.index("## Settings")
    section = readme[start : readme.index("\n## ", start)]
    settings_py = (ROOT / "blobviewer" / "settings.py").read_text()
    preflight_py = (ROOT / "blobviewer" / "serve_preflight.py").read_text()
    names = set(re.findall(r'_env_(?:bool|int|list)\("([A-Z][A-Z0-9_]+)"', settings_py))
    names |= set(re.findall(r'os\.environ\.get\("([A-Z][A-Z0-9_]+)"', settings_py))
    names |= set(re.findall(r'\benv(?:\.get\(|\[|, )"([A-Z][A-Z0-9_]+)"', preflight_py))
    # The object store's, which boto3 reads (blobviewer/data_dir.py names them).
    data_dir_py = (ROOT / "blobviewer" / "data_dir.py").read_text()
    names |= set(re.findall(r'"(AWS_[A-Z_]+)"', data_dir_py))
    assert {"DEBUG", "DATABASE_URL", "BLOBVIEWER_PROXY_COUNT", "GUNICORN_THREADS"} <= names
    assert {"BLOBVIEWER_BLOBS", "AWS_ENDPOINT_URL", "AWS_REGION"} <= names

    undocumented = sorted(name for name in names if f"`{name}`" not in section)

    assert undocumented == []


# --- make run stays the development server ----------------------------------------------


def make_run_dry(*args: str) -> str:
    """The commands `make run` would run (make -n runs none of them)."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith(LEAKY)}
    result = subprocess.run(
        ["make", "--no-print-directory", "-n", "-o", "venv", "run", *args],
        cwd=ROOT,
        env=clean,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return result.stdout


def test_make_run_serves_the_demo_on_port_8000_unless_told_another():
    assert "manage.py serve_demo 127.0.0.1:8000" in make_run_dry()
    assert "manage.py serve_demo 127.0.0.1:8001" in make_run_dry("PORT=8001")
    assert "gunicorn" not in make_run_dry()
