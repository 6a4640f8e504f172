"""`manage.py sessions export SESSION --format html`: one self-contained HTML file of the
session's timeline; no script, no event handler, every recorded text escaped, and a blob's
share of the file capped."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from html.parser import HTMLParser
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command

from blobviewer.catalog.export_html import BLOB_SHARE_BYTES, TEXT_BYTES, cut
from blobviewer.data_dir import blob_store
from blobviewer.models import Item, Session
from core.content import Text

pytestmark = pytest.mark.django_db

REAL = Path(__file__).resolve().parents[2] / "fixtures" / "real"
CLAUDE_RUN = REAL / "a7da6a22-facc-4fcd-8bab-f83c87862004.jsonl"
HOSTILE = "<img src=x onerror=alert(1)><script>alert(2)</script>"


class Tags(HTMLParser):
    """Every start tag of a document, with its attributes."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, Any]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, Any]]) -> None:
        self.tags.append((tag, dict(attrs)))


def tags_of(html: str) -> list[tuple[str, dict[str, Any]]]:
    parser = Tags()
    parser.feed(html)
    return parser.tags


def export_html(session_id: Any) -> str:
    out = StringIO()
    call_command("sessions", "export", str(session_id), "--format", "html", stdout=out)
    return out.getvalue()


def make_session(items: list[dict[str, Any]]) -> Session:
    session = Session.objects.create(
        id=uuid.uuid4(), created_at=datetime(2026, 1, 2, tzinfo=UTC), title=f"run {HOSTILE}"
    )
    for seq, item in enumerate(items, start=1):
        Item.objects.create(session=session, seq=seq, **item)
    return session


def test_the_file_has_no_script_no_handler_and_nothing_from_outside(data_dir):
    call_command("ingest", str(CLAUDE_RUN), stdout=StringIO())
    html = export_html("a7da6a22-facc-4fcd-8bab-f83c87862004")

    tags = tags_of(html)
    assert "<script" not in html.lower()
    assert {name for _, attrs in tags for name in attrs if name.startswith(("on", "hx-"))} == set()
    assert {tag for tag, _ in tags} & {"script", "link", "img", "iframe", "object"} == set()
    # Links stay in the file: every one is to an anchor of its own.
    hrefs = [attrs["href"] for tag, attrs in tags if tag == "a" and "href" in attrs]
    assert hrefs and all(href.startswith("#") for href in hrefs)
    ids = {attrs["id"] for _, attrs in tags if "id" in attrs}
    assert {href[1:] for href in hrefs} <= ids
    assert sum(1 for tag, _ in tags if tag == "style") == 2
    assert html.count('<section class="step') == 108


def test_a_hostile_output_message_and_title_appear_as_text(data_dir):
    session = make_session(
        [
            {"type": "user", "text": HOSTILE},
            {
                "type": "assistant",
                "tool_calls": [{"id": "c1", "name": HOSTILE, "arguments": {"x": HOSTILE}}],
            },
            {"type": "tool_result", "call_id": "c1", "tool": "t", "output": HOSTILE},
        ]
    )
    html = export_html(session.id)

    assert {tag for tag, _ in tags_of(html)} & {"img", "script"} == set()
    escaped = "&lt;img src=x onerror=alert(1)&gt;&lt;script&gt;alert(2)&lt;/script&gt;"
    # The title twice, the message, the tool, its argument, the output.
    assert html.count(escaped) >= 5


def test_a_big_blob_takes_no_more_than_its_share_of_the_file(data_dir):
    big = "".join(f"line {n} of a very long log\n" for n in range(200_000))  # about 5.6 MB
    blob_id = blob_store().store_sync(Text(big))
    summary = f"[blob:{blob_id}] text | 200000 lines\n── head ──\n" + "x" * 3000
    session = make_session(
        [
            {"type": "assistant", "tool_calls": [{"id": "c1", "name": "cat", "arguments": {}}]},
            {
                "type": "tool_result",
                "call_id": "c1",
                "tool": "cat",
                "output": summary,
                "output_bytes": len(summary),
                "received_bytes": len(big),
            },
        ]
    )
    html = export_html(session.id)

    assert "line 199999 of a very long log" not in html
    assert f"[blob:{blob_id}]" in html
    assert "x" * (BLOB_SHARE_BYTES - 100) in html
    assert "x" * BLOB_SHARE_BYTES not in html
    assert f"{len(summary.encode()) - BLOB_SHARE_BYTES:,} more bytes, not in this file" in html
    assert len(html.encode()) < 100_000


def test_a_long_text_is_cut_and_says_how_much_is_left_out(data_dir):
    session = make_session([{"type": "user", "text": "é" * TEXT_BYTES}])
    html = export_html(session.id)

    assert "é" * (TEXT_BYTES // 2) in html
    assert "é" * (TEXT_BYTES // 2 + 1) not in html
    assert f"{TEXT_BYTES:,} more bytes, not in this file" in html


def test_cut_never_splits_a_character():
    assert cut("aé€", 4) == cut("aé€", 5) and cut("aé€", 4).text == "aé"
    assert cut("aé€", 6).more_bytes == 0
    assert cut("aé€", 4).more_bytes == 3


def test_an_inspect_call_links_to_the_step_whose_blob_it_reads_in_the_file(data_dir):
    call_command("ingest", str(CLAUDE_RUN), stdout=StringIO())
    producer = Item.objects.filter(type="tool_result", received_bytes__gt=800).first()
    blob_id = producer.output[6:42]
    session = Session.objects.get()
    last = session.items.order_by("-seq").first().seq
    inspect = {"blob_id": blob_id, "selector": "lines:1-5"}
    stranger = {"blob_id": str(uuid.uuid4())}
    Item.objects.create(
        session=session,
        seq=last + 1,
        type="assistant",
        tool_calls=[
            {"id": "i1", "name": "inspect", "arguments": inspect},
            {"id": "i2", "name": "inspect", "arguments": stranger},
        ],
    )
    html = export_html(session.id)

    assert f'<a class="blob-id" href="#step-{producer.seq}">{blob_id}</a>' in html
    assert f'<code class="blob-id">{stranger["blob_id"]}</code>' in html


def test_a_title_that_looks_like_the_stylesheets_place_does_not_take_it(data_dir):
    session = make_session([{"type": "user", "text": "/* stylesheet */ <style></style>"}])
    session.title = "/* stylesheet */ <style></style>"
    session.save()
    html = export_html(session.id)

    title = html[html.index("<title>") : html.index("</title>")]
    assert "blobviewer" not in title.lower().replace("blobviewer export", "")
    assert "&lt;style&gt;&lt;/style&gt;" in title
    style = html[html.index("<style>") : html.index("</style>")]
    assert "dl.facts" in style  # the site's stylesheet, in its place
