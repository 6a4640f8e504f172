"""The address a request came from, as login throttling counts it.

Behind no proxy (the default) that is REMOTE_ADDR: anything in X-Forwarded-For is what the
client chose to send and is ignored, or a guesser could pose as a new address every try.
Behind proxies that each append the address they saw to X-Forwarded-For (nginx's
`$proxy_add_x_forwarded_for`, most load balancers), settings.BLOBVIEWER_PROXY_COUNT says
how many there are; the client is then the address the outermost of them appended, the
N-th entry from the right. Entries left of it were written by the client and are ignored.
"""

from __future__ import annotations

import ipaddress

from django.conf import settings
from django.http import HttpRequest


def client_address(request: HttpRequest) -> str | None:
    """The client's IP address for `request` (axes' AXES_CLIENT_IP_CALLABLE).

    Falls back to REMOTE_ADDR when proxies are configured but the header is missing, too
    short or not an address there: such a request did not come through all the proxies
    (or they are misconfigured), and the peer's own address is the only one to trust.
    """
    remote = request.META.get("REMOTE_ADDR")
    proxies = int(getattr(settings, "BLOBVIEWER_PROXY_COUNT", 0))
    if proxies <= 0:
        return remote
    forwarded = [part.strip() for part in request.META.get("HTTP_X_FORWARDED_FOR", "").split(",")]
    forwarded = [part for part in forwarded if part]
    if len(forwarded) < proxies:
        return remote
    candidate = forwarded[-proxies]
    try:
        return str(ipaddress.ip_address(candidate))
    except ValueError:
        return remote
