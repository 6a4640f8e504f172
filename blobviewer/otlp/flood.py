"""How many export requests a token may send a minute (`BLOBVIEWER_OTLP_REQUESTS_PER_MINUTE`):
a flood is answered 429 with `Retry-After`, which OTLP exporters honour.

Counted in each server process's memory, a fixed window a minute long: no table to write
on every request, and a limit a few times the setting with several processes (gunicorn's
workers) still bounds a runaway exporter. 0 turns it off.
"""

from __future__ import annotations

import math
import threading
import time

_lock = threading.Lock()
_windows: dict[str, tuple[float, int]] = {}  # token hash -> (its window's start, requests)
_WINDOW = 60.0


def retry_after(token: str, *, per_minute: int, now: float | None = None) -> int:
    """0 when the token (its hash) may send this request (and it is counted), else how many seconds
    until it may."""
    if per_minute <= 0:
        return 0
    now = time.monotonic() if now is None else now
    with _lock:
        start, count = _windows.get(token, (now, 0))
        if now - start >= _WINDOW:
            start, count = now, 0
        if count >= per_minute:
            return max(1, math.ceil(start + _WINDOW - now))
        _windows[token] = (start, count + 1)
        return 0
