"""The one case rule of search, for indexed text and queries alike: Unicode case folding
(Python's `str.casefold()`) of the text as the databases can hold it.

An index keeps a chunk's folded copy only where the database cannot make it: both
databases lower ASCII capitals themselves (SQLite's `lower()`, PostgreSQL's under the "C"
collation), and for most text, all of it ASCII, that is its folding. `folded_copy` says
which chunks need theirs stored (blobviewer.search.queries reads the rest lowered).
"""

from __future__ import annotations

import re

# PostgreSQL refuses NUL in text, and neither database encodes lone surrogates; the index
# keeps the stand-ins that ingest uses for item text (ingest imports storable from here).
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")


def storable(text: str) -> str:
    """*text* as the databases can hold it: NUL as U+2400, lone surrogates as U+FFFD."""
    if text.isascii():  # much faster than the regex over a long text
        return text.replace("\x00", "\u2400") if "\x00" in text else text
    if not _UNSTORABLE.search(text):
        return text
    return _UNSTORABLE.sub(lambda m: "\u2400" if m.group() == "\x00" else "\ufffd", text)


def fold(text: str) -> str:
    """The one case rule of search, for indexed text and queries alike."""
    return storable(text).casefold()


def folded_copy(text: str) -> str | None:
    """The folding of *text* (storable already) when lowering its ASCII capitals does not
    make it, else None: the index keeps no copy and the database lowers the text."""
    if text.isascii():
        return None
    folded = text.casefold()
    # bytes.lower() lowers ASCII capitals only, fifteen times faster than str.translate.
    return None if folded.encode() == text.encode().lower() else folded
