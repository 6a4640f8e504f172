"""The OTLP receiver's flood limit (blobviewer.otlp.flood): counted on the token's row in
the database, so every server process and host counts the same requests."""

from __future__ import annotations

import pytest

from blobviewer.models import ApiToken
from blobviewer.otlp.flood import retry_after

MINUTE = 29_415_000 * 60.0  # the start of a clock minute, in seconds since the epoch


@pytest.mark.django_db
def test_the_count_is_the_rows_so_every_process_sees_it(api_token):
    token, _ = api_token
    # Each request of another process loads the token afresh: the count is what it reads.
    assert [
        retry_after(ApiToken.objects.get(pk=token.pk), per_minute=3, now=MINUTE + s)
        for s in (1, 2, 3)
    ] == [0, 0, 0]
    assert ApiToken.objects.values_list("window_requests", flat=True).get(pk=token.pk) == 3
    assert retry_after(ApiToken.objects.get(pk=token.pk), per_minute=3, now=MINUTE + 45.5) == 15


@pytest.mark.django_db
def test_the_next_minute_opens_a_new_window(api_token):
    token, _ = api_token
    assert [retry_after(token, per_minute=1, now=MINUTE + s) for s in (0, 59.9, 60, 61)] == [
        0,
        1,
        0,
        59,
    ]


@pytest.mark.django_db
def test_each_token_is_counted_apart_and_zero_is_no_limit(api_token, user):
    token, _ = api_token
    other, _ = ApiToken.objects.issue(user=user, name="ci runner")
    assert retry_after(token, per_minute=1, now=MINUTE) == 0
    assert retry_after(other, per_minute=1, now=MINUTE) == 0
    assert retry_after(token, per_minute=1, now=MINUTE) == 60
    assert all(retry_after(token, per_minute=0, now=MINUTE) == 0 for _ in range(5))


@pytest.mark.django_db
def test_hosts_whose_clocks_differ_still_count_one_window(api_token):
    token, _ = api_token
    # One host a minute ahead of the other: the one behind never reopens the newer window.
    answers = [
        retry_after(token, per_minute=2, now=MINUTE + 59 + (60 if n % 2 else 0)) for n in range(6)
    ]
    assert answers.count(0) <= 3
