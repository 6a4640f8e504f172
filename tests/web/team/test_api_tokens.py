"""/tokens/: my API tokens, made on the page, shown once, stored only as a hash, revocable."""

from __future__ import annotations

import hashlib
import re
from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from blobviewer.models import ApiToken

pytestmark = pytest.mark.django_db

SECRET = re.compile(r"bv_[A-Za-z0-9_-]{43}")


def secret_on(html: str) -> str:
    """The one token secret the page shows."""
    [secret] = set(SECRET.findall(html))
    return secret


def test_it_needs_a_login(client):
    response = client.get(reverse("token_list"))

    assert response.status_code == 302
    assert response["Location"].startswith(reverse("login"))


def test_the_header_links_to_my_tokens_next_to_my_share_links(logged_in_client):
    html = logged_in_client.get(reverse("session_list")).content.decode()

    nav = re.search(r'<nav aria-label="main">.*?</nav>', html, re.S).group(0)
    shares = nav.index(reverse("share_list"))
    tokens = nav.index(f'<a href="{reverse("token_list")}">API tokens</a>')
    assert shares < tokens


def test_it_makes_a_token_and_shows_it_once_with_how_to_use_it(logged_in_client):
    response = logged_in_client.post(reverse("token_list"), {"name": "build server"})

    assert response.status_code == 200
    assert "no-store" in response["Cache-Control"]
    html = response.content.decode()
    secret = secret_on(html)
    assert "shown only this once" in html
    assert f'curl -H "Authorization: Bearer {secret}"' in html
    assert "http://testserver/api/sessions" in html
    assert "--data-binary @data/sessions/" in html and "-F log=@data/sessions/" in html

    again = logged_in_client.get(reverse("token_list")).content.decode()
    assert secret not in again
    assert f"<code>{secret[:10]}…</code>" in again


def test_it_stores_only_a_hash_of_the_token(logged_in_client, user):
    response = logged_in_client.post(reverse("token_list"), {"name": "build server"})
    secret = secret_on(response.content.decode())

    token = ApiToken.objects.get()
    assert token.user == user and token.name == "build server"
    assert token.token_hash == hashlib.sha256(secret.encode()).hexdigest()
    assert token.prefix == secret[:10]
    stored = [str(value) for value in ApiToken.objects.values().get().values()]
    assert not any(secret in value for value in stored)
    assert ApiToken.objects.authenticate(secret) == token


@pytest.mark.parametrize("data", [{"name": "  "}, {}], ids=["blank", "missing"])
def test_a_token_needs_a_name(logged_in_client, data):
    response = logged_in_client.post(reverse("token_list"), data)

    assert response.status_code == 400
    assert b'aria-invalid="true"' in response.content
    assert not ApiToken.objects.exists()
    assert not SECRET.search(response.content.decode())


def test_it_lists_only_my_tokens_with_their_state(logged_in_client, user, django_user_model):
    active, _ = ApiToken.objects.issue(user=user, name="laptop")
    revoked, _ = ApiToken.objects.issue(user=user, name="old ci")
    revoked.revoke()
    active.mark_used()
    bob = django_user_model.objects.create_user("bob")
    ApiToken.objects.issue(user=bob, name="bob's agent")

    html = logged_in_client.get(reverse("token_list")).content.decode()

    assert "laptop" in html and "old ci" in html and "bob&#x27;s agent" not in html
    assert ">active<" in html and ">revoked<" in html
    assert html.count(">Revoke</button>") == 1
    assert reverse("token_revoke", args=[active.pk]) in html
    assert f'<time datetime="{active.last_used_at:%Y-%m-%dT%H:%M:%S}' in html
    assert ">never<" in html  # the revoked one was never used


def test_token_names_are_escaped(logged_in_client, user):
    ApiToken.objects.issue(user=user, name="<script>alert(1)</script>")

    html = logged_in_client.get(reverse("token_list")).content.decode()

    assert "<script>alert" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html


def test_revoking_a_token_stops_it_at_once(logged_in_client, client, api_token):
    token, secret = api_token

    response = logged_in_client.post(reverse("token_revoke", args=[token.pk]))

    assert response.status_code == 302
    assert response["Location"] == reverse("token_list")
    token.refresh_from_db()
    assert token.revoked_at is not None
    assert ApiToken.objects.authenticate(secret) is None


def test_revoking_twice_keeps_the_first_time(logged_in_client, api_token):
    token, _ = api_token
    earlier = timezone.now() - timedelta(days=1)
    ApiToken.objects.filter(pk=token.pk).update(revoked_at=earlier)

    logged_in_client.post(reverse("token_revoke", args=[token.pk]))

    token.refresh_from_db()
    assert token.revoked_at == earlier


def test_nobody_can_revoke_someone_elses_token(client, api_token, django_user_model):
    token, _ = api_token
    client.force_login(django_user_model.objects.create_user("mallory"))

    response = client.post(reverse("token_revoke", args=[token.pk]))

    assert response.status_code == 404
    token.refresh_from_db()
    assert token.revoked_at is None


def test_revoking_needs_post(logged_in_client, api_token):
    response = logged_in_client.get(reverse("token_revoke", args=[api_token[0].pk]))

    assert response.status_code == 405


def test_admins_see_tokens_but_cannot_make_them(admin_client, api_token):
    token, _ = api_token

    changelist = admin_client.get(reverse("admin:blobviewer_apitoken_changelist"))
    add = admin_client.get(reverse("admin:blobviewer_apitoken_add"))

    assert changelist.status_code == 200 and token.prefix in changelist.content.decode()
    assert add.status_code == 403


def test_admins_can_revoke_tokens(admin_client, api_token):
    token, _ = api_token

    admin_client.post(
        reverse("admin:blobviewer_apitoken_changelist"),
        {"action": "revoke", "_selected_action": [token.pk]},
    )

    token.refresh_from_db()
    assert token.revoked_at is not None
