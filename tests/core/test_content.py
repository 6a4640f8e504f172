"""Content and ToolOutput (docs/promotion.md): sizes are UTF-8 bytes; lone surrogates are kept."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from core.agent.policy import Policy
from core.content import (
    Inline,
    Stored,
    Structured,
    Text,
    content_kind,
    cut_utf8,
    decode_text,
    encode_text,
    utf8_size,
)


@pytest.mark.parametrize(
    ("content", "kind"),
    [
        (Text("x"), "text"),
        (Structured([1]), "json_array"),
        (Structured({"a": 1}), "json_object"),
        (Structured("s"), "json_string"),
        (Structured(1.5), "json_number"),
        (Structured(False), "json_boolean"),
        (Structured(None), "json_null"),
    ],
)
def test_every_content_has_a_kind(content: Text | Structured, kind: str) -> None:
    assert content_kind(content) == kind


def test_tool_outputs_are_inline_or_stored() -> None:
    assert Inline("x").text == "x"
    assert Stored(Text("x")).content == Text("x")


@pytest.mark.parametrize(
    ("text", "size"), [("", 0), ("abc", 3), ("é", 2), ("€", 3), ("\U0001f600", 4), ("\ud800", 3)]
)
def test_size_means_utf8_bytes(text: str, size: int) -> None:
    assert utf8_size(text) == size


@given(st.text(alphabet=st.characters(codec=None)))
def test_any_str_survives_encoding(text: str) -> None:
    assert decode_text(encode_text(text)) == text
    assert utf8_size(text) == len(encode_text(text))


def test_bytes_that_are_not_utf8_do_not_decode() -> None:
    with pytest.raises(UnicodeDecodeError):
        decode_text(b"caf\xe9")


@given(st.text(), st.integers(min_value=0, max_value=60))
def test_a_cut_keeps_the_longest_prefix_on_a_character_boundary(text: str, size: int) -> None:
    data = text.encode()
    cut = cut_utf8(data, size)
    assert len(cut) <= size and data.startswith(cut)
    cut.decode()  # ends on a boundary
    if len(cut) < len(data):
        next_char = data[len(cut) :].decode()[0]
        assert len(cut) + len(next_char.encode()) > size


def test_policy_numbers_must_be_non_negative_ints() -> None:
    with pytest.raises(ValueError, match="inline_limit"):
        Policy(inline_limit=-1)
    with pytest.raises(ValueError, match="summary_limit"):
        Policy(summary_limit=1.5)  # type: ignore[arg-type]
