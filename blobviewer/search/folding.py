"""The one case rule of search, for indexed text and queries alike: Unicode case folding
(Python's `str.casefold()`) of the text as the databases can hold it.

On SQLite the rule is also the SQL function `casefold(text)`, added to every connection
(:func:`add_casefold`): the search index's triggers fold a chunk's text with it as they
index it, and a search checks its candidates with it, so no folded copy is stored. On
PostgreSQL a chunk keeps its folded copy (:func:`stored_folded`), which its trigram index
reads."""

from __future__ import annotations

import re
from typing import Any

from django.db import connection

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


def stored_folded(text: str) -> str:
    """What a chunk row keeps in its `folded` column for *text* (already storable): its
    folding on PostgreSQL, nothing on SQLite, whose index folds through `casefold()`."""
    return "" if connection.vendor == "sqlite" else text.casefold()


def _casefold(text: Any) -> Any:
    return text.casefold() if isinstance(text, str) else text


def add_casefold(sender: Any, connection: Any, **kwargs: Any) -> None:
    """The `connection_created` receiver that gives a SQLite connection `casefold()`."""
    if connection.vendor == "sqlite":
        connection.connection.create_function("casefold", 1, _casefold, deterministic=True)
