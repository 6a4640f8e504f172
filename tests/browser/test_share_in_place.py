"""Sharing in place in Chromium: "Share this view" with a note and a Copy button, without
leaving the blob page (and without JavaScript, by way of a redirect back); revoking with
hx-confirm, and without JavaScript through the confirmation page; the share page telling
its visitor what it shows. Screenshots of the blob page header, the blob list and the share
page at 1440 and 390 px go to /tmp/shots/prov-*.png."""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from playwright.sync_api import expect

from blobviewer.catalog.blobs import refresh_blob
from blobviewer.data_dir import blob_store
from blobviewer.ingest.sessions import ingest_session
from blobviewer.models import ShareLink
from browser.conftest import PASSWORD
from core.content import Text
from core.inspect_tool import inspect_blob
from core.promotion import admit_sync, promote

SHOTS = Path("/tmp/shots")
WIDE = {"width": 1440, "height": 900}
PHONE = {"width": 390, "height": 844}
SECRET = "the deploy key is in vault/prod"


@pytest.fixture
def run(transactional_db: None, data_dir: Path) -> dict[str, Any]:
    """A recorded run: a Read step made a blob, an inspect step read it, the answer says
    something a share visitor must not see."""
    store = blob_store()
    log = "".join(
        f"2025-05-01 12:00:{n % 60:02d} deploy[{n}]: step {n} {'FAILED' if n == 7 else 'ok'}\n"
        for n in range(1, 301)
    )
    read = admit_sync(promote(log), store)
    inspected = inspect_blob(store, str(read.blob_id), "lines:5-9")
    session_id = uuid.uuid4()
    header = {
        "type": "session",
        "id": str(session_id),
        "created_at": "2025-05-01T12:00:00+00:00",
        "title": "Investigate the failed deploy",
        "model": "m",
        "meta": {},
    }
    at = "2025-05-01T12:00:0{}+00:00"
    records = [
        {"type": "user", "seq": 1, "at": at.format(1), "text": "Why did the deploy fail?"},
        {
            "type": "assistant",
            "seq": 2,
            "at": at.format(2),
            "text": "",
            "tool_calls": [
                {"id": "r1", "name": "Read", "arguments": {"file_path": "logs/deploy.log"}}
            ],
        },
        {
            "type": "tool_result",
            "seq": 3,
            "at": at.format(3),
            "call_id": "r1",
            "tool": "Read",
            "output": read.text,
            "is_error": False,
        },
        {
            "type": "assistant",
            "seq": 4,
            "at": at.format(4),
            "text": "",
            "tool_calls": [
                {
                    "id": "i1",
                    "name": "inspect",
                    "arguments": {"blob_id": str(read.blob_id), "selector": "lines:5-9"},
                }
            ],
        },
        {
            "type": "tool_result",
            "seq": 5,
            "at": at.format(5),
            "call_id": "i1",
            "tool": "inspect",
            "output": inspected,
            "is_error": False,
        },
        {"type": "assistant", "seq": 6, "at": at.format(6), "text": SECRET, "tool_calls": []},
    ]
    ingest_session(header, records, source_path=f"test:{session_id}", store=store)
    return {"blob": read.blob_id, "session": session_id}


@pytest.fixture
def open_page(
    browser: Any, live_server: Any, django_user_model: Any, transactional_db: None
) -> Iterator[Callable[..., Any]]:
    """Opens a page in a fresh context (logged in as alice unless told otherwise); dialogs
    are left to the test, and the context may grant the clipboard or turn JavaScript off."""
    django_user_model.objects.create_user("alice", password=PASSWORD)
    contexts = []

    def open_one(*, login: bool = True, **options: Any) -> Any:
        context = browser.new_context(**options)
        context.set_default_timeout(10_000)
        contexts.append(context)
        page = context.new_page()
        if login:
            page.goto(f"{live_server.url}/accounts/login/")
            page.fill("#id_username", "alice")
            page.fill("#id_password", PASSWORD)
            page.click("button[type=submit]")
            page.wait_for_url(f"{live_server.url}/")
        return page

    yield open_one
    for context in contexts:
        context.close()


def no_sideways_scroll(page: Any) -> bool:
    return page.evaluate("document.scrollingElement.scrollWidth <= window.innerWidth")


# --- sharing in place -----------------------------------------------------------------------


def test_share_in_place_with_a_note_and_copy_the_link(open_page, live_server, run):
    page = open_page(permissions=["clipboard-read", "clipboard-write"])
    blob_url = f"{live_server.url}/blobs/{run['blob']}/?selector=lines:5-9"
    page.goto(blob_url)

    page.click("text=Share this view")
    page.fill("#id_note", "Line 7 is where it fails")
    page.click("text=Create share link")

    field = page.locator("#share-box input.share-url")
    expect(field).to_have_value(re.compile(rf"^{re.escape(live_server.url)}/share/[\w-]+/$"))
    expect(page).to_have_url(blob_url)  # never left the page
    expect(page.locator("#share-box")).to_contain_text("Line 7 is where it fails")
    link = ShareLink.objects.get()
    assert (link.note, link.selector) == ("Line 7 is where it fails", "lines:5-9")
    assert field.input_value() == f"{live_server.url}/share/{link.token}/"

    page.click("#share-box button.copy")

    expect(page.locator("#share-url-status")).to_have_text("Copied")
    assert page.evaluate("navigator.clipboard.readText()") == field.input_value()


def test_share_without_javascript_goes_back_to_the_blob_with_the_link(open_page, live_server, run):
    page = open_page(java_script_enabled=False)
    page.goto(f"{live_server.url}/blobs/{run['blob']}/?selector=lines:5-9")

    page.click("text=Share this view")  # <details> opens without JavaScript
    page.fill("#id_note", "no script here")
    page.click("text=Create share link")

    expect(page).to_have_url(
        re.compile(r"/blobs/[0-9a-f-]+/\?selector=lines%3A5-9&shared=\d+#share-box$")
    )
    link = ShareLink.objects.get()
    field = page.locator("#share-box input.share-url")
    expect(field).to_have_value(f"{live_server.url}/share/{link.token}/")
    expect(page.locator("#share-box")).to_contain_text("no script here")
    expect(page.locator("#share-box button.copy")).to_be_hidden()  # needs the script


def test_the_share_page_tells_what_it_shows_and_nothing_else(open_page, live_server, run):
    owner = open_page()
    owner.goto(f"{live_server.url}/blobs/{run['blob']}/?selector=lines:5-9")
    owner.click("text=Share this view")
    owner.fill("#id_note", "Line 7 is where it fails")
    owner.click("text=Create share link")
    share_url = owner.locator("#share-box input.share-url").input_value()

    visitor = open_page(login=False)
    visitor.goto(share_url)

    head = visitor.locator("header.blob-head")
    expect(visitor.locator("h1")).to_have_text("Read logs/deploy.log")
    expect(head).to_contain_text("Output of step #3 in “Investigate the failed deploy”")
    expect(head.locator("blockquote")).to_have_text("Line 7 is where it fails")
    expect(visitor.locator("#blob-view pre")).to_contain_text("step 7 FAILED")
    expect(visitor.locator("body")).not_to_contain_text(SECRET)
    expect(visitor.locator("body")).not_to_contain_text("Why did the deploy fail?")
    hrefs = visitor.eval_on_selector_all("a[href]", "links => links.map(a => a.pathname)")
    assert all(not path.startswith(("/sessions/", "/blobs/", "/shares/")) for path in hrefs)


# --- revoking -------------------------------------------------------------------------------


def test_revoke_with_javascript_asks_in_a_dialog(open_page, live_server, run):
    link = ShareLink.objects.create(blob_id=run["blob"], selector="lines:5-9", created_by=_alice())
    page = open_page()
    page.goto(f"{live_server.url}/shares/")
    row = page.locator(f"#share-{link.pk}")

    # Dismissed: nothing happens.
    page.once("dialog", lambda dialog: dialog.dismiss())
    row.locator("text=Revoke").click()
    expect(row.locator("td.status")).to_have_text("active")
    expect(page).to_have_url(f"{live_server.url}/shares/")

    messages: list[str] = []

    def accept(dialog: Any) -> None:
        messages.append(dialog.message)
        dialog.accept()

    page.once("dialog", accept)
    row.locator("text=Revoke").click()

    expect(page.locator(f"#share-{link.pk} td.status")).to_have_text("revoked")
    assert messages and messages[0].startswith("Revoke this link?")
    expect(page).to_have_url(f"{live_server.url}/shares/")  # swapped in place
    link.refresh_from_db()
    assert link.revoked_at is not None
    gone = open_page(login=False)
    gone.goto(f"{live_server.url}/share/{link.token}/")
    expect(gone.locator("h1")).to_contain_text("no longer works")


def test_revoke_without_javascript_goes_through_the_confirmation_page(open_page, live_server, run):
    link = ShareLink.objects.create(
        blob_id=run["blob"], selector="lines:5-9", created_by=_alice(), note="for Sam"
    )
    page = open_page(java_script_enabled=False)
    page.goto(f"{live_server.url}/shares/")

    page.locator(f"#share-{link.pk}").locator("text=Revoke").click()

    expect(page.locator("h1")).to_have_text("Revoke this link?")
    expect(page.locator("section.confirm")).to_contain_text("for Sam")
    link.refresh_from_db()
    assert link.revoked_at is None  # asking revokes nothing

    page.click("text=Revoke link")

    expect(page).to_have_url(f"{live_server.url}/shares/")
    expect(page.locator(f"#share-{link.pk} td.status")).to_have_text("revoked")
    expect(page.locator("ul.messages")).to_contain_text("Share link revoked")


def _alice() -> Any:
    from django.contrib.auth import get_user_model

    return get_user_model().objects.get(username="alice")


# --- how it looks -----------------------------------------------------------------------------


def test_screenshots_of_the_header_the_list_and_the_share_page(open_page, live_server, run):
    SHOTS.mkdir(exist_ok=True)
    _more_blobs()
    page = open_page()
    blob_url = f"{live_server.url}/blobs/{run['blob']}/?selector=lines:5-9"
    page.goto(blob_url)
    page.click("text=Share this view")
    page.fill("#id_note", "Line 7 is where it fails — look at the step before it, too")
    page.click("text=Create share link")
    share_url = page.locator("#share-box input.share-url").input_value()
    visitor = open_page(login=False)

    for name, size in (("1440", WIDE), ("390", PHONE)):
        page.set_viewport_size(size)
        page.goto(blob_url)
        page.click("text=Share this view")
        page.screenshot(path=str(SHOTS / f"prov-blob-{name}.png"))
        assert no_sideways_scroll(page), f"the blob page scrolls sideways at {name} px"
        page.click("text=Create share link")
        expect(page.locator("#share-box input.share-url")).to_be_visible()
        page.locator("#share-box").screenshot(path=str(SHOTS / f"prov-shared-{name}.png"))
        assert no_sideways_scroll(page), f"the shared link scrolls sideways at {name} px"

        page.goto(f"{live_server.url}/blobs/")
        expect(page.locator("tr.blob-row")).to_have_count(3)
        page.screenshot(path=str(SHOTS / f"prov-list-{name}.png"), full_page=True)
        assert no_sideways_scroll(page), f"the blob list scrolls sideways at {name} px"

        page.goto(f"{live_server.url}/shares/")
        page.screenshot(path=str(SHOTS / f"prov-shares-{name}.png"), full_page=True)
        assert no_sideways_scroll(page), f"my share links scroll sideways at {name} px"

        visitor.set_viewport_size(size)
        visitor.goto(share_url)
        visitor.screenshot(path=str(SHOTS / f"prov-share-{name}.png"))
        assert no_sideways_scroll(visitor), f"the share page scrolls sideways at {name} px"


def _more_blobs() -> None:
    """A JSON blob made by a shell step with a long command, and one no session knows."""
    store = blob_store()
    issues = orjson.dumps([{"id": n, "title": f"issue {n}", "labels": []} for n in range(80)])
    made = admit_sync(promote(issues.decode()), store)
    session_id = uuid.uuid4()
    command = "gh issue list --repo example/blobviewer --state open --limit 80 --json id,title"
    header = {
        "type": "session",
        "id": str(session_id),
        "created_at": "2025-05-02T08:00:00+00:00",
        "title": "Triage the open issues of the week, oldest first",
        "model": "m",
        "meta": {},
    }
    records = [
        {
            "type": "assistant",
            "seq": 1,
            "at": None,
            "text": "",
            "tool_calls": [{"id": "b1", "name": "bash", "arguments": {"command": command}}],
        },
        {
            "type": "tool_result",
            "seq": 2,
            "at": None,
            "call_id": "b1",
            "tool": "bash",
            "output": made.text,
            "is_error": False,
        },
    ]
    ingest_session(header, records, source_path=f"test:{session_id}", store=store)
    alone = store.store_sync(Text("x" * 300 + " a very long first line\n" + "tail\n" * 50))
    refresh_blob(alone, store=store)
