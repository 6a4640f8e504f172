"""The compare page in Chromium, at a desk's width and a phone's: two runs of one task
(tests/web/compare/pairs.py) side by side; jump to where they part ways, open the diff of
a pair whose outputs differ, page it, and follow a step's blob link."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import call_command

from importers.recordings import CLAUDE_SESSION
from web.compare.pairs import B_SESSION, write_pair


@pytest.mark.parametrize("width", [1440, 390])
def test_jump_to_the_divergence_open_a_diff_page_it_and_follow_a_blob(
    page, live_server, data_dir, tmp_path, width
):
    a, b = write_pair(tmp_path)
    call_command("ingest", str(a), str(b), stdout=StringIO(), stderr=StringIO())
    page.set_viewport_size({"width": width, "height": 900})
    page.goto(f"{live_server.url}/sessions/{CLAUDE_SESSION}/")
    page.click("text=Compare with another run…")
    page.click(f"a.compare-with[href='/compare/{CLAUDE_SESSION}/{B_SESSION}/']")
    page.wait_for_url(f"**/compare/{CLAUDE_SESSION}/{B_SESSION}/")

    page.click("a.first-divergence")
    first = page.locator("li.pair.first")
    assert first.get_attribute("id") == "pair-3"
    assert page.evaluate("location.hash") == "#pair-3"
    assert first.locator(".side-b .gap").inner_text() == "— not in this run"
    assert first.is_visible()

    pair = page.locator("li.pair.differs")
    pair.locator("a.open-diff").click()
    diff = pair.locator(".output-diff")
    diff.locator("pre.diff").wait_for()
    first_added = diff.locator("pre.diff .added").first.inner_text()
    assert first_added.startswith("+") and first_added.endswith("# changed")
    diff.locator("a.more-diff").click()
    page.wait_for_function(
        "first => document.querySelector('li.pair.differs pre.diff .added').textContent !== first",
        arg=first_added,
    )
    assert page.url.endswith(f"/compare/{CLAUDE_SESSION}/{B_SESSION}/?page=1#pair-3")  # no reload
    # Nothing is wider than the window, at either width.
    assert page.evaluate("document.documentElement.scrollWidth") <= width

    with page.expect_navigation():
        pair.locator(".side-b a.blob-link").click()
    assert "/blobs/" in page.url
    assert page.locator("h1").count() == 1
    assert page.problems.console_errors == []
