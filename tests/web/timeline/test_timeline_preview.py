"""The start of an item that the timeline shows: a prefix that fits its budget as HTML."""

from __future__ import annotations

import uuid

from django.utils.html import escape
from hypothesis import given
from hypothesis import strategies as st

from blobviewer.timeline.previews import PREVIEW_BYTES, preview
from core.content import utf8_size

REF = f"[blob:{uuid.UUID(int=7)}]"


def html_size(text: str) -> int:
    return len(escape(text).encode())


def test_a_short_text_is_shown_whole():
    assert preview("hello", 5).text == "hello"
    assert preview("hello", 5).more_bytes == 0


def test_it_counts_escaped_utf8_bytes_not_characters():
    shown = preview("€" * 1_000, 3_000).text
    assert 0.9 * PREVIEW_BYTES <= utf8_size(shown) <= PREVIEW_BYTES
    shown = preview("<&>" * 1_000, 3_000).text
    assert html_size(shown) <= PREVIEW_BYTES
    assert len(shown) < PREVIEW_BYTES / 4


def test_it_says_how_many_bytes_of_the_whole_text_are_left_out():
    head = "€" * 400  # the start the database sent of a text of 10,000 bytes
    cut = preview(head, 10_000)
    assert cut.more_bytes == 10_000 - utf8_size(cut.text)


def test_a_blob_reference_at_the_cut_is_kept_whole():
    # The budget runs out inside the reference (its link markup counts too).
    head = "x" * (PREVIEW_BYTES - 250) + REF + "y" * 200
    shown = preview(head, utf8_size(head)).text
    assert shown.endswith(REF)


@given(st.text(max_size=2_000), st.integers(min_value=0, max_value=2_000))
def test_it_is_a_prefix_within_the_budget(text, budget):
    cut = preview(text, utf8_size(text), budget=budget)
    assert text.startswith(cut.text)
    assert cut.more_bytes == utf8_size(text) - utf8_size(cut.text)
    if REF[:6] not in text:
        assert html_size(cut.text) <= max(budget, 0)
