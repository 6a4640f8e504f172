"""Results as the wire's dicts, valid in both protocol eras the SDK serves.

The proxy passes results on as the dicts it received (so nothing is lost or reshaped on
the way), and the `inspect` results are dicts too. MCP 2026-07-28 requires every result
to carry its `resultType`, and the results of the cacheable methods how long a client may
keep them; the SDK drops both from what handshake-era clients get.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from mcp.server import CacheHint
from mcp_types.methods import CACHEABLE_METHODS

# Lists and resources behind a proxy change whenever its server says so: never cached.
NO_CACHING: dict[Any, CacheHint] = {
    method: CacheHint(ttl_ms=0, scope="private")
    for method in CACHEABLE_METHODS
    if method != "server/discover"  # the SDK's own answer
}


_Context = TypeVar("_Context")
_Params = TypeVar("_Params")


def wire_handler(
    handler: Callable[[_Context, _Params], Awaitable[dict[str, Any]]],
) -> Callable[[_Context, _Params], Awaitable[Any]]:
    """*handler* itself, typed as the SDK's Server takes it: the SDK sends a handler's dict
    as it is (mcp.server.runner), though its annotations name only its result models."""
    return handler


def complete(result: dict[str, Any]) -> dict[str, Any]:
    """*result*, marked as a complete result (as a handshake-era server never marks it)."""
    result.setdefault("resultType", "complete")
    return result
