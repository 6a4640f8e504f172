"""The line model (docs/promotion.md): split on "\\n", one trailing "\\r" dropped, no empty last
line."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from core.lines import (
    count_lines,
    head_lines,
    iter_lines,
    line_slice,
    line_start,
    split_lines,
    tail_lines,
)

# Texts made mostly of line breaks and carriage returns, where the line model has its edges.
line_texts = st.lists(st.sampled_from(["a", "é", "\n", "\r", "\r\n", " ", "\U0001f600"])).map(
    "".join
)
any_texts = st.one_of(line_texts, st.text())


@pytest.mark.parametrize(
    ("text", "lines"),
    [
        ("", []),
        ("a", ["a"]),
        ("a\n", ["a"]),
        ("a\n\nb", ["a", "", "b"]),
        ("\n", [""]),
        ("\n\n", ["", ""]),
        ("a\nb\n", ["a", "b"]),
        ("a\nb\n\n", ["a", "b", ""]),
    ],
)
def test_it_splits_on_newlines_without_an_empty_last_line(text: str, lines: list[str]) -> None:
    assert split_lines(text) == lines
    assert count_lines(text) == len(lines)


def test_an_empty_text_has_no_lines() -> None:
    assert count_lines("") == 0
    assert split_lines("") == []


def test_a_text_without_a_final_newline_has_one_line() -> None:
    assert count_lines("a") == 1
    assert count_lines("a\n") == 1


def test_a_blank_line_in_the_middle_counts() -> None:
    assert count_lines("a\n\nb") == 3


def test_it_strips_one_carriage_return_per_line() -> None:
    assert split_lines("a\r\nb\r\n") == ["a", "b"]
    assert split_lines("a\r\r\nb") == ["a\r", "b"]
    assert split_lines("a\r") == ["a"]


def test_a_lone_carriage_return_does_not_split_lines() -> None:
    assert split_lines("a\rb") == ["a\rb"]
    assert count_lines("a\rb") == 1


def test_line_numbers_start_at_one() -> None:
    text = "one\ntwo\nthree\n"
    assert line_slice(text, 1, 1) == ["one"]
    assert line_slice(text, 2, 3) == ["two", "three"]
    assert line_start(text, 1) == 0
    assert line_start(text, 2) == 4


def test_it_clamps_end_past_last_line() -> None:
    assert line_slice("a\nb\nc", 2, 99) == ["b", "c"]


def test_a_start_past_the_end_gives_no_lines() -> None:
    assert line_slice("a\nb", 3, 5) == []
    assert line_start("a\nb", 10) == 3


def test_head_and_tail_strip_carriage_returns_too() -> None:
    text = "a\r\nb\r\nc\r\n"
    assert head_lines(text, 2) == ["a", "b"]
    assert tail_lines(text, 2) == ["b", "c"]


def test_it_walks_to_a_line_across_chunk_boundaries() -> None:
    # More than a megabyte of lines, so line_start counts in several chunks.
    lines = [f"{n:07d}" for n in range(1, 300_001)]
    text = "\n".join(lines) + "\n"
    for number in (1, 131_072, 131_073, 299_999, 300_000):
        assert line_slice(text, number, number) == [lines[number - 1]]
    assert tail_lines(text, 2) == lines[-2:]


@given(any_texts)
def test_count_lines_matches_split_lines(text: str) -> None:
    assert count_lines(text) == len(split_lines(text))


@given(any_texts)
def test_lines_are_the_text_without_its_line_breaks(text: str) -> None:
    # Every line break is "\n" with at most one "\r" before it; a text's end counts as one.
    normalized = re.sub(r"\r?\n", "\n", text)
    if normalized and not normalized.endswith("\n"):
        normalized = normalized.removesuffix("\r") + "\n"
    assert "".join(line + "\n" for line in split_lines(text)) == normalized


@given(any_texts, st.integers(min_value=0, max_value=30))
def test_head_lines_are_the_first_lines(text: str, count: int) -> None:
    assert head_lines(text, count) == split_lines(text)[:count]


@given(any_texts, st.integers(min_value=0, max_value=30))
def test_tail_lines_are_the_last_lines(text: str, count: int) -> None:
    expected = split_lines(text)[-count:] if count else []
    assert tail_lines(text, count) == expected


@given(any_texts, st.integers(min_value=1, max_value=30), st.integers(min_value=0, max_value=40))
def test_line_slice_agrees_with_split_lines(text: str, start: int, end: int) -> None:
    assert line_slice(text, start, end) == split_lines(text)[start - 1 : end]


@given(any_texts, st.integers(min_value=1, max_value=30))
def test_line_start_is_where_the_line_begins(text: str, number: int) -> None:
    position = line_start(text, number)
    lines = split_lines(text)
    if number <= len(lines):
        assert split_lines(text[position:])[:1] == [lines[number - 1]]
    else:
        assert split_lines(text[position:]) == []


@given(st.text(alphabet="ab\r\n", max_size=60), st.integers(1, 12), st.integers(0, 12))
def test_iter_lines_numbers_the_same_lines_as_split_lines(
    text: str, start: int, count: int
) -> None:
    expected = list(enumerate(split_lines(text), start=1))[start - 1 : start - 1 + count]
    assert list(iter_lines(text, start, start + count - 1)) == expected
