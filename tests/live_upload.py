"""Waiting for an upload that a thread of the code under test sends to pytest-django's
live server (a real HTTP round trip, so its effect is seen a moment later)."""

from __future__ import annotations

import threading
from collections.abc import Callable

from django.db import OperationalError


def wait_for(condition: Callable[[], object], *, what: str, tries: int = 600) -> None:
    """Poll *condition* every 50 ms until it is true; fail naming *what* never happened."""
    pause = threading.Event()
    for _ in range(tries):
        try:
            if condition():
                return
        except OperationalError:
            pass  # SQLite's shared in-memory test database: locked while the server writes
        pause.wait(0.05)
    raise AssertionError(f"never happened: {what}")
