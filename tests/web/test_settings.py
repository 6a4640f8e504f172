"""Settings from the environment; `check --deploy` is clean with production settings."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

PRODUCTION = {
    "DEBUG": "false",
    "SECRET_KEY": "x7Jq!v2#pL9z@kT4wR8&mN3^bY6*cH1(eF5)gD0-aS_uI+oP=lK~jZ?xC<vB>nM",
    "ALLOWED_HOSTS": "blobs.example.com",
    "DATABASE_URL": "sqlite:///:memory:",
}


def run(command: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120, check=False
    )


def manage(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    inherited = ("DEBUG", "SECRET_KEY", "DJANGO_ALLOW_ASYNC_UNSAFE")
    clean = {k: v for k, v in os.environ.items() if k not in inherited}
    return run([sys.executable, "manage.py", *args], {**clean, **env})


def test_check_deploy_is_clean_with_production_settings(tmp_path):
    result = manage(
        "check",
        "--deploy",
        "--fail-level",
        "WARNING",
        env={**PRODUCTION, "BLOBVIEWER_DATA": str(tmp_path)},
    )

    assert result.returncode == 0, result.stdout + result.stderr
    assert "System check identified no issues" in result.stdout


def test_production_refuses_to_start_without_a_secret_key(tmp_path):
    env = {**PRODUCTION, "SECRET_KEY": "", "BLOBVIEWER_DATA": str(tmp_path)}

    result = manage("check", env=env)

    assert result.returncode != 0
    assert "SECRET_KEY must be set when DEBUG is false" in result.stderr


def test_the_data_directory_holds_the_sqlite_database_by_default(tmp_path):
    code = "from django.conf import settings; print(settings.DATABASES['default']['NAME'])"
    env = {"BLOBVIEWER_DATA": str(tmp_path / "data"), "DATABASE_URL": ""}

    result = manage("shell", "-c", code, env=env)

    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().splitlines()[-1] == str(tmp_path / "data" / "db.sqlite3")


KEEPS_ITS_CONNECTION = """
import django
django.setup()
from django.conf import settings
from django.contrib.auth.models import User
from django.core.handlers.wsgi import WSGIHandler
from django.core.management import call_command
from django.db import connection
from django.test import Client, RequestFactory

call_command("migrate", verbosity=0)
client = Client()
client.force_login(User.objects.get_or_create(username="ada")[0])
cookie = f"{settings.SESSION_COOKIE_NAME}={client.cookies[settings.SESSION_COOKIE_NAME].value}"
opened = connection.connection
statuses = []
for _ in range(2):  # the session list, its session and user read from the database
    request = RequestFactory(SERVER_NAME="localhost", HTTP_COOKIE=cookie).get("/")
    response = WSGIHandler()(request.environ, lambda status, headers: statuses.append(status))
    response.close()  # the end of the request, as a server signals it
print(*statuses, connection.connection is opened, sep=",")
"""


def test_a_request_leaves_its_database_connection_open_for_the_next(tmp_path):
    """A page does not pay for opening a database connection (3 ms and more on PostgreSQL):
    the one open when a request ends is the next one's, through the handler a server runs
    (a file database: Django never closes an in-memory one)."""
    database = f"sqlite:///{tmp_path / 'db.sqlite3'}"
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "blobviewer.settings", "DATABASE_URL": database}
    env.pop("CONN_MAX_AGE", None)

    kept = run([sys.executable, "-c", KEEPS_ITS_CONNECTION], env)
    closed = run([sys.executable, "-c", KEEPS_ITS_CONNECTION], {**env, "CONN_MAX_AGE": "0"})

    assert (kept.returncode, kept.stdout.strip()) == (0, "200 OK,200 OK,True"), kept.stderr
    assert (closed.returncode, closed.stdout.strip()) == (0, "200 OK,200 OK,False"), closed.stderr


def test_the_asgi_server_closes_each_requests_connection(tmp_path):
    """Under ASGI a request's synchronous code runs in a thread of its own, so a connection
    kept past the request would be left behind: the ASGI entry point keeps none."""
    code = (
        "import blobviewer.asgi; from django.db import connection; "
        "print(connection.settings_dict['CONN_MAX_AGE'])"
    )
    env = {**os.environ, "DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite3'}"}
    env.pop("CONN_MAX_AGE", None)
    env.pop("DJANGO_SETTINGS_MODULE", None)

    result = run([sys.executable, "-c", code], env)

    assert (result.returncode, result.stdout.strip()) == (0, "0"), result.stderr
