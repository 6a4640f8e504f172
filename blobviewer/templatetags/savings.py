"""How much smaller promotion made the tool output: `received|ratio:in_history`."""

from __future__ import annotations

from django import template

register = template.Library()

NO_RATIO = "—"


@register.filter
def ratio(received: int | None, in_history: int | None) -> str:
    """`12.4×`: bytes the tools produced over bytes that entered the history; `—` when
    nothing was received (or nothing entered the history, so there is nothing to divide)."""
    if not received or not in_history:
        return NO_RATIO
    return f"{received / in_history:,.1f}×"
