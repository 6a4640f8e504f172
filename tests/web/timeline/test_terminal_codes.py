"""Terminal colour codes in recorded outputs: dropped on the pages, kept in the store."""

from __future__ import annotations

import uuid

import pytest
from django.core.management import call_command
from django.urls import reverse

from blobviewer.models import Item
from blobviewer.templatetags.terminal import strip_terminal_codes
from web.records import header, tool_result_item, user_item

pytestmark = pytest.mark.django_db

ESC = "\x1b"
COLOURED = f"{ESC}[38;2;255;0;0m<error>{ESC}[0m & {ESC}[1;31mfailed{ESC}[m"


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("plain text\n", "plain text\n"),
        (COLOURED, "<error> & failed"),
        (f"{ESC}[2K{ESC}[1A{ESC}[?25lprogress{ESC}[?25h", "progress"),
        (f"{ESC}]0;window title\x07prompt", "prompt"),
        (f"{ESC}]8;;https://example.com{ESC}\\link{ESC}]8;;{ESC}\\", "link"),
        (f"{ESC}(B{ESC}[mreset", "reset"),
        (f"cut off at the end {ESC}[38;2;25", "cut off at the end "),
        (f"a lone escape {ESC}", "a lone escape "),
        ("[not a code] 38;2m <b>", "[not a code] 38;2m <b>"),
    ],
)
def test_it_strips_csi_and_osc_sequences_and_nothing_else(text, shown):
    assert strip_terminal_codes(text) == shown


def test_the_filter_leaves_escaping_to_the_template(logged_in_client, text_blob):
    from django.template import engines

    template = engines["django"].from_string("{% load terminal %}{{ text|strip_terminal_codes }}")

    assert template.render({"text": COLOURED}) == "&lt;error&gt; &amp; failed"


def test_the_timeline_shows_outputs_without_colour_codes_but_stores_them(
    logged_in_client, write_log
):
    session_id = uuid.uuid4()
    path = write_log(
        [header(session_id), user_item(1, COLOURED), tool_result_item(2, COLOURED * 3)]
    )
    call_command("ingest", str(path))
    url = reverse("session_detail", args=[session_id])

    for headers in ({}, {"HX-Request": "true"}):
        html = logged_in_client.get(url, headers=headers).content.decode()

        assert ESC not in html
        assert "&lt;error&gt; &amp; failed" in html
    item_html = logged_in_client.get(reverse("item_detail", args=[session_id, 2])).content
    assert ESC.encode() not in item_html
    assert Item.objects.get(seq=2).output == COLOURED * 3


def test_the_blob_page_shows_text_without_colour_codes_but_raw_keeps_them(
    logged_in_client, text_blob
):
    blob_id = text_blob(f"{COLOURED}\nline two {ESC}[32mok{ESC}[0m\n")
    url = reverse("blob_detail", args=[blob_id])

    for query in ({}, {"selector": "lines:2"}, {"selector": "grep:ok"}):
        for headers in ({}, {"HX-Request": "true"}):
            html = logged_in_client.get(url, query, headers=headers).content.decode()
            assert ESC not in html
    assert "&lt;error&gt; &amp; failed" in logged_in_client.get(url).content.decode()
    raw = b"".join(logged_in_client.get(reverse("blob_raw", args=[blob_id])).streaming_content)
    assert raw == f"{COLOURED}\nline two {ESC}[32mok{ESC}[0m\n".encode()
    inspected = logged_in_client.get(reverse("api_inspect", args=[blob_id])).content
    assert ESC.encode() in inspected
