"""What a tool returns (ToolOutput) and what a blob holds (Content)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from core.json_values import json_type

# Lone surrogates (e.g. from os.fsdecode of undecodable names) must survive a round trip
# through the store instead of raising, so every str <-> bytes step uses this handler.
UTF8_ERRORS = "surrogatepass"


def encode_text(text: str) -> bytes:
    """UTF-8 bytes of *text*; lone surrogates are kept (never an exception)."""
    return text.encode("utf-8", UTF8_ERRORS)


def decode_text(data: bytes) -> str:
    """Inverse of :func:`encode_text`; raises UnicodeDecodeError on bytes that are not UTF-8."""
    return data.decode("utf-8", UTF8_ERRORS)


def cut_utf8(data: bytes, size: int) -> bytes:
    """The longest prefix of *data* of at most *size* bytes that ends on a character boundary."""
    if size >= len(data):
        return data
    while size > 0 and data[size] & 0xC0 == 0x80:  # a continuation byte: inside a character
        size -= 1
    return data[:size]


def utf8_size(text: str) -> int:
    """Size of *text* in UTF-8 bytes, the unit of every limit."""
    if text.isascii():
        return len(text)
    return len(encode_text(text))


@dataclass(frozen=True, slots=True)
class Text:
    """A plain text blob."""

    text: str

    @property
    def kind(self) -> str:
        return "text"


@dataclass(frozen=True, slots=True)
class Structured:
    """A JSON value: dict, list, str, int, float, bool or None."""

    value: Any

    @property
    def kind(self) -> str:
        return f"json_{json_type(self.value)}"


Content = Text | Structured


def content_kind(content: Content) -> str:
    """`text`, `json_array`, `json_object`, `json_string`, `json_number`, ..."""
    return content.kind


@dataclass(frozen=True, slots=True)
class Inline:
    """A small output that goes into the history as it is."""

    text: str


@dataclass(frozen=True, slots=True)
class Stored:
    """A large output: *content* goes to the blob store and a summary into the history.

    The summary itself is rendered by :func:`core.summary.summarize` once the store has
    returned the blob id, because the summary starts with `[blob:<id>]`.
    """

    content: Content


ToolOutput = Inline | Stored
