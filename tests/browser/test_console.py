"""No page logs a console error: every kind of page, opened and used as a reader would
(htmx swaps included), in Chromium."""

from __future__ import annotations

import re

from playwright.sync_api import expect

from blobviewer.models import ShareLink


def test_no_page_logs_a_console_error(page, live_server, sample_session, django_user_model):
    url = live_server.url
    alice = django_user_model.objects.get(username="alice")
    share = ShareLink.objects.create(blob_id=sample_session.json_blob, created_by=alice)

    # The session list: a search typed and sent with Enter at once, then sorted.
    page.goto(f"{url}/")
    page.wait_for_load_state("domcontentloaded")
    page.fill("#id_q", "build")
    page.press("#id_q", "Enter")
    expect(page.locator("p.count")).to_contain_text("with “build”")
    page.click("table.sessions th a.sort >> text=Items")
    expect(page).to_have_url(re.compile(r"sort="))

    # A session, a find in it, a blob opened in place and a selector run there.
    page.goto(f"{url}/sessions/{sample_session.id}/")
    page.wait_for_load_state("domcontentloaded")
    page.locator("#step-3 a.blob-ref").click()
    in_place = page.locator("#item-3-blob.blob-view.in-place")
    expect(in_place).to_contain_text("lines 1–300 of 300")
    in_place.locator("input[name=selector]").fill("grep:module_4")
    in_place.locator("input[name=selector]").press("Enter")
    expect(in_place).to_contain_text("matches in lines")
    page.goto(f"{url}/sessions/{sample_session.id}/find?q=module")
    page.goto(f"{url}/sessions/{sample_session.id}/items/1/")

    # Blob pages: text with selectors, a JSON tree opened and closed, raw JSON.
    page.goto(f"{url}/blobs/{sample_session.text_blob}/?selector=lines:10-20")
    page.wait_for_load_state("domcontentloaded")
    page.fill("#blob-view-selector", "grep:module_1")
    page.press("#blob-view-selector", "Enter")
    expect(page.locator("#blob-view .caption")).to_contain_text("matches")
    page.keyboard.press("]")
    page.goto(f"{url}/blobs/{sample_session.json_blob}/")
    page.wait_for_load_state("domcontentloaded")
    for name in ("Expand all", "Collapse all"):
        page.get_by_role("button", name=name).first.click()
    page.get_by_role("link", name="Raw").first.click()
    expect(page).to_have_url(re.compile(r"as=raw"))
    page.goto(f"{url}/blobs/{sample_session.json_blob}/?selector=slice:0..2")
    page.goto(f"{url}/blobs/")

    # Sharing, tokens, a shared blob seen without a login, and the error pages.
    page.goto(f"{url}/shares/")
    page.goto(f"{url}/tokens/")
    page.goto(f"{url}/share/{share.token}/?selector=slice:1..2")
    missing = f"{url}/blobs/00000000-0000-7000-8000-000000000000/"
    page.goto(missing)  # the 404 page
    expect(page.locator("h1")).to_be_visible()

    # Chromium itself logs the 404 status of the page asked for; nothing else may log.
    status = f"{missing}: Failed to load resource: the server responded with a status of 404"
    assert [e for e in page.problems.console_errors if not e.startswith(status)] == []
    assert page.problems.csp_violations == []
