"""Playwright driving Debian's Chromium against a live server with a temporary data dir.

These tests never skip: without a Chromium at BLOBVIEWER_CHROMIUM (default
/usr/bin/chromium) they fail, saying how to install one.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from blobviewer.data_dir import blob_store
from blobviewer.ingest.sessions import ingest_file
from web.records import SampleSession, record_sample_session

CHROMIUM = Path(os.environ.get("BLOBVIEWER_CHROMIUM", "/usr/bin/chromium"))
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
PASSWORD = "correct-horse-battery"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if here in Path(item.fspath).parents:
            item.add_marker(pytest.mark.browser)


@pytest.fixture(scope="package")
def browser() -> Iterator[Any]:
    """One Chromium for this package's tests, stopped after them: Playwright's sync API
    runs an event loop in this thread, which would break later tests' asyncio.run()."""
    if not CHROMIUM.exists():
        pytest.fail(
            f"No Chromium at {CHROMIUM}: install it (apt-get install chromium) or point "
            "BLOBVIEWER_CHROMIUM at one. Browser tests never skip.",
            pytrace=False,
        )
    from playwright.sync_api import sync_playwright

    # With that loop running, Django's ORM refuses to run unless told it is safe (the
    # tests' own queries are); only while these tests run, so no subprocess inherits it.
    previous = os.environ.get("DJANGO_ALLOW_ASYNC_UNSAFE")
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    try:
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
            yield browser
            browser.close()
    finally:
        if previous is None:
            del os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"]
        else:
            os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = previous


class PageProblems:
    """Dialogs opened, Content-Security-Policy violations, and every console error or
    uncaught exception seen on a page (with the address it was seen at)."""

    def __init__(self, page: Any) -> None:
        self.page = page
        self.dialogs: list[str] = []
        self.csp_violations: list[str] = []
        self.console_errors: list[str] = []
        page.on("dialog", self._on_dialog)
        page.on("console", self._on_console)
        page.on("pageerror", self._on_page_error)

    def _on_dialog(self, dialog: Any) -> None:
        self.dialogs.append(dialog.message)
        dialog.dismiss()

    def _on_console(self, message: Any) -> None:
        if "Content Security Policy" in message.text:
            self.csp_violations.append(message.text)
        if message.type == "error":
            self.console_errors.append(f"{self.page.url}: {message.text}")

    def _on_page_error(self, error: Any) -> None:
        self.console_errors.append(f"{self.page.url}: uncaught {error}")


# How long a request the live server is still serving may take to end once its page is
# closed (a page a test leaves may have sent one the test did not wait for).
REQUEST_END_SECONDS = 10


def _wait_for_live_requests() -> None:
    """Waits for the live server's request threads (one per connection, named after their
    target as threading names them) to end. The test's flush must not run beside one:
    with SQLite in memory, both threads share one connection, and a request's transaction
    inside the flush's breaks it (and leaves the rows for the next test)."""
    for thread in threading.enumerate():
        if thread.name.endswith("(process_request_thread)"):
            thread.join(REQUEST_END_SECONDS)
            if thread.is_alive():
                pytest.fail(
                    f"A live-server request ran on {REQUEST_END_SECONDS} s after its page closed."
                )


@pytest.fixture
def new_page(browser: Any) -> Iterator[Any]:
    """Opens pages in fresh browser contexts (no cookies shared); closes them afterwards,
    and waits for the requests they left running, before the database is flushed (the
    flush, of transactional_db, is set up first and so torn down last)."""
    contexts = []

    def open_page() -> Any:
        context = browser.new_context()
        context.set_default_timeout(10_000)
        contexts.append(context)
        page = context.new_page()
        page.problems = PageProblems(page)
        return page

    yield open_page
    for context in contexts:
        context.close()
    _wait_for_live_requests()


@pytest.fixture
def sample_session(data_dir: Path, transactional_db: None) -> SampleSession:
    sample = record_sample_session(blob_store(), data_dir / "sessions")
    ingest_file(sample.path, store=blob_store())
    return sample


@pytest.fixture
def page(new_page: Any, live_server: Any, django_user_model: Any, transactional_db: None) -> Any:
    """A page logged in as alice through the login form."""
    django_user_model.objects.create_user("alice", password=PASSWORD)
    page = new_page()
    page.goto(f"{live_server.url}/accounts/login/")
    page.fill("#id_username", "alice")
    page.fill("#id_password", PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_url(f"{live_server.url}/")
    return page
