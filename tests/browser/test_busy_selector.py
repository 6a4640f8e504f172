"""In a real browser: a selector that the server is too busy to evaluate (429) shows its
one-line message beside the box, as a bad selector (400) does, and the same selector
works once the server has a free slot again (docs/pages.md#expensive-selectors)."""

from __future__ import annotations

import fcntl
import os
from pathlib import Path
from typing import Any

from playwright.sync_api import expect

from blobviewer.reader.slots import busy_message


def take_every_slot(data_dir: Path, slots: int) -> list[int]:
    """Hold the limit's lock files as other worker processes would."""
    (data_dir / "locks").mkdir(exist_ok=True)
    held = []
    for n in range(slots):
        fd = os.open(data_dir / "locks" / f"expensive-{n}.lock", os.O_RDWR | os.O_CREAT)
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        held.append(fd)
    return held


def test_a_busy_server_answers_beside_the_selector_box(
    page: Any, live_server: Any, sample_session: Any, data_dir: Path, settings: Any
) -> None:
    settings.BLOBVIEWER_EXPENSIVE_WAIT_SECONDS = 0
    page.goto(f"{live_server.url}/blobs/{sample_session.text_blob}/")
    held = take_every_slot(data_dir, settings.BLOBVIEWER_EXPENSIVE_CONCURRENCY)
    try:
        page.fill("#blob-view-selector", "grep:module_7[0-9]\\.")
        page.press("#blob-view-selector", "Enter")

        expect(page.locator("#blob-view-error")).to_have_text(busy_message())
        expect(page.locator("#blob-view-selector")).to_have_value("grep:module_7[0-9]\\.")
        # The answer swapped in and settled: a key pressed before then may reach the box
        # the swap replaces (a busy CI machine saw the second Enter lost).
        expect(page.locator(".htmx-request, .htmx-swapping, .htmx-settling")).to_have_count(0)
    finally:
        for fd in held:
            os.close(fd)

    page.press("#blob-view-selector", "Enter")

    expect(page.locator("#blob-view .caption")).to_contain_text("10 matches in lines 1–300 of 300")
    expect(page.locator("#blob-view-error")).to_have_count(0)
