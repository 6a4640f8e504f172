"""Login throttling (docs/team.md#login-throttling): both login forms lock a username from
one address after a handful of wrong passwords, answer 429 with a page, and let go after
the cool-off."""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from axes.models import AccessAttempt
from django.conf import settings
from django.core.management import call_command
from django.db.models import F
from django.test import Client

pytestmark = pytest.mark.django_db

ROOT = Path(__file__).resolve().parents[3]
PASSWORD = "correct-horse-battery"
ATTACKER = "203.0.113.7"
ELSEWHERE = "198.51.100.20"

# Each login form: where it is, and where a good login leads (the form's own `next`).
FORMS = {
    "site": ("/accounts/login/", "/"),
    "admin": ("/admin/login/", "/admin/"),
}


@pytest.fixture(autouse=True)
def fast_passwords(settings: Any) -> None:
    """These tests send dozens of passwords; what they judge is the counting, not the hash
    (Django's default takes a good part of a second per password on a small machine)."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture(params=sorted(FORMS))
def form(request: pytest.FixtureRequest) -> tuple[str, str]:
    return FORMS[request.param]


@pytest.fixture
def staff(django_user_model: Any) -> Any:
    """alice and bob, staff so that the admin's form lets them in too."""
    for name in ("alice", "bob"):
        django_user_model.objects.create_user(name, password=PASSWORD, is_staff=True)


def log_in(
    client: Client,
    url: str,
    username: str,
    password: str,
    *,
    address: str = ATTACKER,
    **headers: str,
) -> Any:
    landing = next(landing for form, landing in FORMS.values() if form == url)
    return client.post(
        url,
        {"username": username, "password": password, "next": landing},
        REMOTE_ADDR=address,
        **headers,
    )


def fail_until_locked(client: Client, url: str, username: str = "alice", **kwargs: Any) -> Any:
    """Send the failure limit's worth of wrong passwords; returns the last answer."""
    for _ in range(settings.AXES_FAILURE_LIMIT):
        response = log_in(client, url, username, "wrong-guess", **kwargs)
    return response


def assert_logged_in(response: Any, landing: str) -> None:
    assert response.status_code == 302, response.content[:300]
    assert response["Location"] == landing


def test_the_limit_is_five_failures_and_the_cool_off_fifteen_minutes_by_default():
    assert settings.AXES_FAILURE_LIMIT == 5
    assert settings.AXES_COOLOFF_TIME.total_seconds() == 15 * 60
    assert settings.AXES_LOCKOUT_PARAMETERS == [["username", "ip_address"]]


def test_failures_below_the_limit_only_show_the_form_again(client, staff, form):
    url, _ = form
    for _ in range(settings.AXES_FAILURE_LIMIT - 1):
        response = log_in(client, url, "alice", "wrong-guess")
        assert response.status_code == 200
        assert b"Too many failed logins" not in response.content

    assert_logged_in(log_in(client, url, "alice", PASSWORD), form[1])


def test_it_locks_the_account_from_that_address_at_the_limit_with_a_429_page(client, staff, form):
    url, _ = form

    response = fail_until_locked(client, url)

    assert response.status_code == 429
    html = response.content.decode()
    assert "<h1>Too many failed logins</h1>" in html
    assert "Try again in 15 minutes" in html
    assert "manage.py axes_reset" in html
    assert f'<a href="{url}">Back to the login form</a>' in html
    assert "css/site.css" in html  # the site's own page, not axes' bare text line


def test_the_lockout_page_has_no_inline_script_or_style(client, staff, form):
    url, _ = form

    html = fail_until_locked(client, url).content.decode()

    assert "<script>" not in html
    assert "<style" not in html
    assert "style=" not in html
    assert "script-src 'self'" in fail_until_locked(client, url)["Content-Security-Policy"]


def test_the_right_password_is_refused_while_locked(client, staff, form):
    url, _ = form
    fail_until_locked(client, url)

    response = log_in(client, url, "alice", PASSWORD)

    assert response.status_code == 429
    assert "_auth_user_id" not in client.session
    assert client.get("/").status_code == 302  # still a stranger


def test_another_username_from_the_same_address_is_not_locked(client, staff, form):
    url, landing = form
    fail_until_locked(client, url, "alice")

    assert_logged_in(log_in(client, url, "bob", PASSWORD), landing)


def test_the_same_username_from_another_address_is_not_locked(client, staff, form):
    url, landing = form
    fail_until_locked(client, url, "alice")

    assert_logged_in(log_in(client, url, "alice", PASSWORD, address=ELSEWHERE), landing)


def test_a_locked_account_logs_in_again_after_the_cool_off(client, staff, form):
    url, landing = form
    fail_until_locked(client, url)
    assert log_in(client, url, "alice", PASSWORD).status_code == 429

    # Move the failures back in time past the cool-off, as the clock would.
    past = settings.AXES_COOLOFF_TIME + timedelta(seconds=1)
    AccessAttempt.objects.update(attempt_time=F("attempt_time") - past)

    assert_logged_in(log_in(client, url, "alice", PASSWORD), landing)


def test_a_locked_account_is_still_locked_just_before_the_cool_off_ends(client, staff, form):
    url, _ = form
    fail_until_locked(client, url)

    almost = settings.AXES_COOLOFF_TIME - timedelta(seconds=30)
    AccessAttempt.objects.update(attempt_time=F("attempt_time") - almost)

    assert log_in(client, url, "alice", PASSWORD).status_code == 429


def test_axes_reset_unlocks_at_once(client, staff, form):
    url, landing = form
    fail_until_locked(client, url)

    call_command("axes_reset", stdout=open(os.devnull, "w"))  # noqa: SIM115

    assert_logged_in(log_in(client, url, "alice", PASSWORD), landing)


def test_a_good_login_forgets_the_failures_before_it(client, staff):
    url, landing = FORMS["site"]
    for _ in range(settings.AXES_FAILURE_LIMIT - 1):
        log_in(client, url, "alice", "typo")
    assert_logged_in(log_in(client, url, "alice", PASSWORD), landing)
    client.post("/accounts/logout/")

    for _ in range(settings.AXES_FAILURE_LIMIT - 1):
        assert log_in(client, url, "alice", "typo").status_code == 200
    assert_logged_in(log_in(client, url, "alice", PASSWORD), landing)


def test_failures_on_one_form_count_on_the_other(client, staff):
    for _ in range(settings.AXES_FAILURE_LIMIT - 1):
        log_in(client, FORMS["site"][0], "alice", "wrong-guess")

    assert log_in(client, FORMS["admin"][0], "alice", "wrong-guess").status_code == 429
    assert log_in(client, FORMS["site"][0], "alice", PASSWORD).status_code == 429


def test_a_failed_try_is_recorded_without_its_password(client, staff):
    log_in(client, FORMS["site"][0], "alice", "hunter2-almost-right")

    attempt = AccessAttempt.objects.get()
    assert (attempt.username, attempt.ip_address, attempt.failures_since_start) == (
        "alice",
        ATTACKER,
        1,
    )
    assert "hunter2" not in attempt.post_data


def test_a_hostile_username_is_escaped_on_the_lockout_page(client, staff):
    name = '<script>alert("x")</script>'

    response = fail_until_locked(client, FORMS["site"][0], name)

    assert response.status_code == 429
    assert b"<script>alert" not in response.content


# --- the client's address ---------------------------------------------------------------


def test_without_proxies_x_forwarded_for_cannot_dodge_the_lock(client, staff):
    url, _ = FORMS["site"]
    for n in range(settings.AXES_FAILURE_LIMIT):
        log_in(client, url, "alice", "wrong-guess", HTTP_X_FORWARDED_FOR=f"192.0.2.{n}")

    response = log_in(client, url, "alice", PASSWORD, HTTP_X_FORWARDED_FOR="192.0.2.200")

    assert response.status_code == 429


def test_behind_a_proxy_the_address_it_appended_is_the_client(client, staff, settings):
    settings.BLOBVIEWER_PROXY_COUNT = 1
    url, landing = FORMS["site"]
    proxy = "127.0.0.1"
    # The client rotates a made-up first entry; the proxy appends the address it saw.
    for n in range(settings.AXES_FAILURE_LIMIT):
        log_in(
            client,
            url,
            "alice",
            "wrong-guess",
            address=proxy,
            HTTP_X_FORWARDED_FOR=f"192.0.2.{n}, {ATTACKER}",
        )

    locked = log_in(client, url, "alice", PASSWORD, address=proxy, HTTP_X_FORWARDED_FOR=ATTACKER)
    assert locked.status_code == 429
    other = log_in(client, url, "alice", PASSWORD, address=proxy, HTTP_X_FORWARDED_FOR=ELSEWHERE)
    assert_logged_in(other, landing)
    assert AccessAttempt.objects.get().ip_address == ATTACKER


def test_behind_a_proxy_a_request_without_the_header_counts_as_the_peer(client, staff, settings):
    settings.BLOBVIEWER_PROXY_COUNT = 2
    url, _ = FORMS["site"]

    # One entry where two proxies should have written two: it did not come through both.
    fail_until_locked(client, url, address=ELSEWHERE, HTTP_X_FORWARDED_FOR=ATTACKER)

    assert AccessAttempt.objects.get().ip_address == ELSEWHERE


def test_behind_a_proxy_a_garbled_header_counts_as_the_peer(client, staff, settings):
    settings.BLOBVIEWER_PROXY_COUNT = 1
    url, _ = FORMS["site"]

    log_in(client, url, "alice", "wrong-guess", address=ELSEWHERE, HTTP_X_FORWARDED_FOR="unknown")

    assert AccessAttempt.objects.get().ip_address == ELSEWHERE


# --- settings from the environment ------------------------------------------------------


def run_python(code: str, **env: str) -> subprocess.CompletedProcess[str]:
    """Run `code` with Django set up in a fresh process, with `env` over a clean copy."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("BLOBVIEWER_")}
    setup = "import django; django.setup(); from django.conf import settings as s; "
    return subprocess.run(
        [sys.executable, "-c", setup + code],
        cwd=ROOT,
        env={
            **clean,
            "DJANGO_SETTINGS_MODULE": "blobviewer.settings",
            "DATABASE_URL": "sqlite:///:memory:",
            **env,
        },
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_the_limit_the_cool_off_and_the_proxy_count_come_from_the_environment():
    code = (
        "print(s.AXES_FAILURE_LIMIT, s.AXES_COOLOFF_TIME.total_seconds(), s.BLOBVIEWER_PROXY_COUNT)"
    )

    result = run_python(
        code,
        BLOBVIEWER_LOGIN_FAILURE_LIMIT="8",
        BLOBVIEWER_LOGIN_COOLOFF_MINUTES="60",
        BLOBVIEWER_PROXY_COUNT="1",
    )

    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["8", "3600.0", "1"]


@pytest.mark.parametrize(
    "name", ["BLOBVIEWER_LOGIN_FAILURE_LIMIT", "BLOBVIEWER_LOGIN_COOLOFF_MINUTES"]
)
def test_a_limit_or_cool_off_of_zero_is_refused(name):
    result = run_python("pass", **{name: "0"})

    assert result.returncode != 0
    message = (
        "BLOBVIEWER_LOGIN_FAILURE_LIMIT and BLOBVIEWER_LOGIN_COOLOFF_MINUTES must be at least 1"
    )
    assert result.stderr.strip().splitlines()[-1].endswith(message)
