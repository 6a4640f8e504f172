"""How many export requests a token may send a minute (`BLOBVIEWER_OTLP_REQUESTS_PER_MINUTE`):
a flood is answered 429 with `Retry-After`, which OTLP exporters honour.

Counted on the token's own row (the request already writes it: `last_used_at`), so every
server process and host that shares the database counts the same requests: a fixed window
of a clock minute, opened and counted by single conditional UPDATEs that no two requests
can both win past the limit. 0 turns it off.
"""

from __future__ import annotations

import math
import time

from django.db.models import F

from blobviewer.models import ApiToken

_WINDOW = 60


def retry_after(token: ApiToken, *, per_minute: int, now: float | None = None) -> int:
    """0 when *token* may send this request (and it is counted), else how many seconds
    until it may."""
    if per_minute <= 0:
        return 0
    now = time.time() if now is None else now
    minute = int(now // _WINDOW)
    rows = ApiToken.objects.filter(pk=token.pk)
    # Counted in the open window, else a new window opened over an older one (never over a
    # newer one: a host whose clock is behind counts in it; a request that lost the race to
    # open it is counted in the one the winner opened).
    for _ in range(2):
        if rows.filter(window_minute=minute, window_requests__lt=per_minute).update(
            window_requests=F("window_requests") + 1
        ):
            return 0
        if rows.filter(window_minute__lt=minute).update(window_minute=minute, window_requests=1):
            return 0
    return max(1, math.ceil((minute + 1) * _WINDOW - now))
