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


def manage(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    inherited = ("DEBUG", "SECRET_KEY", "DJANGO_ALLOW_ASYNC_UNSAFE")
    clean = {k: v for k, v in os.environ.items() if k not in inherited}
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env={**clean, **env},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


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
