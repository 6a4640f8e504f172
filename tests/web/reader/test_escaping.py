"""Blob and session content is untrusted: every page escapes it; none runs inline script."""

from __future__ import annotations

import html as html_lib
import json
import re
import uuid

import pytest
from django.core.management import call_command
from django.templatetags.static import static
from django.urls import reverse

from blobviewer.ingest.sessions import ingest_session
from blobviewer.models import ShareLink
from core.content import Text
from web.records import header, tool_result_item, user_item

pytestmark = pytest.mark.django_db

HOSTILE = (
    '<script>alert(1)</script> <img src=x onerror="alert(2)"> <a href="javascript:alert(3)">x</a>'
)
HTMX = {"HX-Request": "true"}


def assert_inert(html: str) -> None:
    """No hostile markup survived as markup; it is all shown as text."""
    assert "<script>alert" not in html
    assert "<img src=x" not in html
    assert '<a href="javascript:' not in html
    # A grep page marks what matched (<mark>, our markup) inside the escaped text.
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in re.sub("</?mark>", "", html)


def test_a_text_blob_is_escaped_on_every_view(logged_in_client, text_blob):
    blob_id = text_blob((HOSTILE + "\n") * 3)
    url = reverse("blob_detail", args=[blob_id])

    for query in ({}, {"selector": "lines:2-3"}, {"selector": "grep:script"}):
        for headers in ({}, HTMX):
            assert_inert(logged_in_client.get(url, query, headers=headers).content.decode())


def test_json_keys_and_values_are_escaped(logged_in_client, json_blob):
    blob_id = json_blob({HOSTILE: HOSTILE, "nested": [{HOSTILE: 1}]})
    url = reverse("blob_detail", args=[blob_id])

    for query in ({}, {"selector": "key:nested"}, {"as": "raw"}, {"selector": "keys:0..2"}):
        html = logged_in_client.get(url, query).content.decode()
        assert "<script>alert" not in html and "<img src=x" not in html


@pytest.mark.parametrize("path", ["src/evil.py", "site/evil.html"])
def test_hostile_code_is_escaped_through_the_colouring_path(logged_in_client, store, path):
    # Coloured because the call that made it read a file of that type: the one place
    # blob content goes through Pygments' HTML, which must escape it all the same.
    blob_id = store.store_sync(Text(f"x = '{HOSTILE}'\n<p>{HOSTILE}</p>\n"))
    call = {"id": "c1", "name": "Read", "arguments": {"file_path": path}}
    log = [
        header(),
        {"type": "assistant", "seq": 1, "text": "", "tool_calls": [call]},
        tool_result_item(2, f"[blob:{blob_id}] text | 2 lines", tool="Read", call_id="c1"),
    ]
    ingest_session(log[0], log[1:], source_path="t", store=store)
    url = reverse("blob_detail", args=[blob_id])

    for headers in ({}, HTMX):
        html = logged_in_client.get(url, headers=headers).content.decode()
        assert "coloured as" in html
        assert "<script>alert" not in html and "<img src=x" not in html
        assert '<a href="javascript:' not in html
        # The hostile text is all there, as text, once the colouring's spans are gone.
        code = re.search(r'<pre class="content lines[^>]*>(.*?)</pre>', html, re.S).group(1)
        assert HOSTILE in html_lib.unescape(re.sub(r"<[^>]+>", "", code))


def test_the_value_of_a_hostile_key_is_escaped(logged_in_client, json_blob):
    blob_id = json_blob({HOSTILE: HOSTILE + "\n" + HOSTILE})
    url = reverse("blob_detail", args=[blob_id])
    # HOSTILE holds '"', so the key is quoted as a JSON string for the selector to parse.
    query = {"selector": "key:" + json.dumps(HOSTILE)}

    page = logged_in_client.get(url, query)
    fragment = logged_in_client.get(url, query, headers=HTMX)

    assert page.status_code == fragment.status_code == 200
    for html in (page.content.decode(), fragment.content.decode()):
        assert_inert(html)
        assert "lines 1–2 of 2" in html  # the key's value, read as text
        assert '<a class="ln" href="#L2" tabindex="-1">2</a>&lt;script&gt;alert(1)' in html
    # The only script elements are our static files (htmx's among them); none is inline,
    # and the fragment has none.
    scripts = re.findall(r"<script[^>]*>", page.content.decode())
    assert f'<script src="{static("vendor/htmx-2.0.11.min.js")}" defer>' in scripts
    assert all(re.fullmatch(r'<script src="/static/[^"]+\.js" defer>', tag) for tag in scripts)
    assert "<script" not in fragment.content.decode()


def test_a_hostile_selector_is_escaped_in_the_box_and_the_error(logged_in_client, text_blob):
    blob_id = text_blob("text\n")

    response = logged_in_client.get(
        reverse("blob_detail", args=[blob_id]), {"selector": '"><script>alert(1)</script>'}
    )

    assert response.status_code == 400
    html = response.content.decode()
    assert "<script>alert" not in html
    assert 'value="&quot;&gt;&lt;script&gt;' in html


def test_session_titles_texts_outputs_and_tool_calls_are_escaped(logged_in_client, write_log):
    session_id = uuid.uuid4()
    hostile_call = {
        "type": "assistant",
        "seq": 2,
        "text": HOSTILE,
        "tool_calls": [{"id": HOSTILE, "name": HOSTILE, "arguments": {HOSTILE: HOSTILE}}],
    }
    path = write_log(
        [
            header(session_id, title=HOSTILE, model=HOSTILE, meta={HOSTILE: HOSTILE}),
            user_item(1, HOSTILE),
            hostile_call,
            tool_result_item(3, HOSTILE, tool=HOSTILE, call_id=HOSTILE),
        ]
    )
    call_command("ingest", str(path))

    for url in (reverse("session_list"), reverse("session_detail", args=[session_id])):
        for headers in ({}, HTMX):
            assert_inert(logged_in_client.get(url, headers=headers).content.decode())
    html = logged_in_client.get(reverse("session_list"), {"q": HOSTILE}).content.decode()
    assert_inert(html)


def test_a_shared_hostile_blob_is_escaped_too(client, user, text_blob):
    link = ShareLink.objects.create(
        blob_id=_indexed(text_blob(HOSTILE)), selector="", created_by=user
    )

    assert_inert(client.get(reverse("share_detail", args=[link.token])).content.decode())


def _indexed(blob_id: uuid.UUID) -> uuid.UUID:
    from blobviewer.catalog.blobs import refresh_blob
    from blobviewer.data_dir import blob_store

    return refresh_blob(blob_id, store=blob_store()).id


def test_pages_forbid_inline_script_with_a_content_security_policy(logged_in_client, text_blob):
    blob_id = text_blob(HOSTILE)

    for url in (reverse("session_list"), reverse("blob_detail", args=[blob_id])):
        policy = logged_in_client.get(url)["Content-Security-Policy"]
        assert "script-src 'self'" in policy
        assert "unsafe-inline" not in policy
        assert "default-src 'self'" in policy
        assert "frame-ancestors 'none'" in policy


def test_the_login_page_sends_the_policy_too(client, db):
    assert "script-src 'self'" in client.get(reverse("login"))["Content-Security-Policy"]


def test_no_page_carries_inline_script(logged_in_client, sample_session):
    for url in (
        reverse("session_list"),
        reverse("session_detail", args=[sample_session.id]),
        reverse("blob_list"),
        reverse("blob_detail", args=[sample_session.text_blob]),
    ):
        html = logged_in_client.get(url).content.decode()
        assert "<script>" not in html
        assert "<script src=" in html  # htmx, from our own static files
        assert " on" + "click=" not in html and "<style" not in html


def test_a_hostile_user_item_with_a_blob_reference_is_escaped_around_the_link(
    logged_in_client, write_log, text_blob
):
    blob_id = text_blob("x\n")
    session_id = uuid.uuid4()
    text = f"{HOSTILE}[blob:{blob_id}]{HOSTILE}"
    call_command("ingest", str(write_log([header(session_id), user_item(1, text)])))

    html = logged_in_client.get(reverse("session_detail", args=[session_id])).content.decode()

    assert_inert(html)
    assert f">[blob:{blob_id}]</a>" in html
