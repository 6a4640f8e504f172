"""Promotion: a tool's output string becomes Inline or Stored (the seed's `From<String>`).

Then :func:`admit` turns a ToolOutput into the text the history gets: the output itself,
or, for a Stored output, the summary of the blob it was saved as.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from core import json_stream
from core.agent.policy import DEFAULT_POLICY, Policy
from core.content import Inline, Stored, Structured, Text, ToolOutput, utf8_size
from core.json_values import JsonError, dumps_for_storage, parse_json
from core.summary import summarize

if TYPE_CHECKING:
    from core.store import BlobStore
    from core.store.blob_id import BlobId

_LEADING_SPACE = re.compile(r"\s*")


def promote(output: str, policy: Policy = DEFAULT_POLICY) -> ToolOutput:
    """Inline when *output* is at most ``policy.inline_limit`` UTF-8 bytes, else Stored.

    A Stored output holds a JSON array or object as Structured when the output (less
    surrounding whitespace) is one; anything else is kept as Text.
    """
    # Every character is at least one byte, so a long str needs no encoding to decide.
    if len(output) <= policy.inline_limit and utf8_size(output) <= policy.inline_limit:
        return Inline(output)
    return Stored(_content_of(output))


def _content_of(output: str) -> Text | Structured:
    # No copy of a huge string, unlike lstrip.
    start = _LEADING_SPACE.match(output).end()  # type: ignore[union-attr]  # \s* always matches
    if output[start : start + 1] in ("[", "{"):
        if len(output) >= json_stream.STREAM_FROM_CHARS:
            # A big one is written entry by entry, never held as a value (core.json_stream).
            try:
                if (streamed := json_stream.stream_json(output)) is not None:
                    return streamed
            except json_stream.NotJson:
                return Text(output)
        try:
            value = parse_json(output)
        except JsonError:
            pass
        else:
            if isinstance(value, list | dict) and _storable(value):
                return Structured(value)
    return Text(output)


def _storable(value: list[Any] | dict[str, Any]) -> bool:
    # orjson reads JSON nested up to 1024 deep but cannot write it back, and the stdlib
    # encoder runs out of stack near 1000 levels; such a value stays Text instead of
    # failing later in the store. Writing costs a small fraction of the parse.
    try:
        dumps_for_storage(value)
    except (TypeError, ValueError, RecursionError):
        return False
    return True


@dataclass(frozen=True, slots=True)
class Admitted:
    """What enters the history for one tool output, and the blob it was stored as, if any."""

    text: str
    blob_id: BlobId | None = None


async def admit(output: ToolOutput, store: BlobStore, policy: Policy = DEFAULT_POLICY) -> Admitted:
    """Store a Stored output and return its summary; an Inline output passes as it is."""
    if isinstance(output, Inline):
        return Admitted(output.text)
    blob_id = await store.store(output.content)
    return Admitted(summarize(blob_id, output.content, policy), blob_id)


def admit_sync(output: ToolOutput, store: BlobStore, policy: Policy = DEFAULT_POLICY) -> Admitted:
    """:func:`admit` for synchronous callers (importers, the CLI)."""
    if isinstance(output, Inline):
        return Admitted(output.text)
    blob_id = store.store_sync(output.content)
    return Admitted(summarize(blob_id, output.content, policy), blob_id)
