"""How core and the site word what people read: a count with its noun ("1 turn",
"1,201 matches") and a one-line excerpt of a longer text."""

from __future__ import annotations

__all__ = ["excerpt", "plural"]


def plural(count: int, one: str, many: str | None = None) -> str:
    """*count*, its thousands separated by commas, and *one*, or for any other count
    *many* (*one* + "s" unless given)."""
    return f"{count:,} {one if count == 1 else (many or one + 's')}"


def excerpt(text: str, limit: int) -> str:
    """*text* on one line (every run of whitespace one space), cut to at most *limit*
    characters, the last of them "…" when it was cut."""
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"
