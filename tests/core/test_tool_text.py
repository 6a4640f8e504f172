"""core.tool_text: which tool outputs are text in a wrapper, and the text they hold."""

from __future__ import annotations

import json

import pytest

from core.tool_text import WrappedText, unwrap_text

TEXT = "line one\nline two"


@pytest.mark.parametrize(
    "output",
    [
        [{"type": "text", "text": "line one"}, {"type": "text", "text": "line two"}],  # MCP
        [{"type": "input_text", "text": "line one"}, {"type": "output_text", "text": "line two"}],
        json.dumps([{"text": "line one", "type": "text"}, {"text": "line two", "type": "text"}]),
        "  \n" + json.dumps([{"type": "text", "text": TEXT}]),  # leading whitespace
        {"content": TEXT},
        {"result": TEXT},
        json.dumps({"output": TEXT}),
        {"content": [{"type": "text", "text": TEXT}]},
    ],
)
def test_text_in_a_wrapper_is_the_text_it_holds(output) -> None:
    assert unwrap_text(output) == WrappedText(TEXT)


@pytest.mark.parametrize(
    "output",
    [
        TEXT,
        "",
        "[not json",
        json.dumps([1, 2, 3]),
        json.dumps([{"type": "event", "id": 1}, {"type": "event", "id": 2}]),  # no text block
        json.dumps([{"type": "text", "text": "a"}, {"id": 2}]),  # an entry that is no block
        json.dumps([{"type": "text", "text": 3}]),  # a text block without a text
        [{"type": "image", "data": "…"}],  # nothing but an image
        {"error": "not found"},  # not a wrapper's key
        {"content": TEXT, "isError": False},  # two keys
        {"content": 42},
        json.dumps({"results": [{"type": "text", "text": "x"}]}),
        [],
    ],
)
def test_anything_else_stays_as_it_is(output) -> None:
    assert unwrap_text(output) is None


def test_blocks_of_other_kinds_are_left_out_and_named() -> None:
    blocks = [
        {"type": "text", "text": "see the chart"},
        {"type": "image", "data": "iVBOR…", "mimeType": "image/png"},
        {"type": "input_image", "image_url": "data:…"},
        {"type": "audio", "data": "…"},
        {"type": "text", "text": "and the sound"},
    ]
    unwrapped = unwrap_text(blocks)
    assert unwrapped is not None
    assert unwrapped.text == "see the chart\nand the sound"
    assert unwrapped.note == "2 images and 1 audio not stored"
    assert unwrap_text(blocks[:2]).note == "1 image not stored"


def test_a_big_encoded_list_reads_back_byte_for_byte() -> None:
    big = "".join(f'row {n}: ünïcode \\ "quoted" \t tab\n' for n in range(3000))
    encoded = json.dumps([{"text": big, "type": "text"}, {"text": "tail", "type": "text"}])
    assert unwrap_text(encoded).text == big + "\ntail"
