"""`make serve`: the production server as a team runs it, behind a simulated HTTPS proxy
(started as tests/web/production.py says), what it refuses to start with, and how it
configures gunicorn."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from core.content import Text
from core.store import FsBlobStore
from core.store.s3.client import LIMITS
from web.production import (
    FAILURE_LIMIT,
    HOST,
    LEAKY,
    MAKE_SERVE,
    PASSWORD,
    ROOT,
    Browser,
    Server,
    create_superuser,
    free_port,
    own_database,
    production_env,
    serving,
)


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    with own_database(tmp_path) as database_url, serving(tmp_path, database_url) as running:
        yield running


def test_make_serve_runs_gunicorn_behind_an_https_proxy(server: Server):
    blob = FsBlobStore(server.data / "blobs").store_sync(
        Text("".join(f"line {n}: served by gunicorn\n" for n in range(1, 200)))
    )
    create_superuser(server)
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
        (
            {"BLOBVIEWER_S3_READ_TIMEOUT": "soon"},
            "BLOBVIEWER_S3_READ_TIMEOUT must be a number of seconds above 0, not 'soon'",
        ),
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
    names |= set(LIMITS)  # the object store client's timeouts, tries and turns
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
