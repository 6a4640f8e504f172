"""JSON values: exact parsing (big integers, no NaN), compact/indented/stored forms, type
names and shapes as summaries and inspect show them."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import json_values

from core.json_values import (
    JsonError,
    display_key,
    dumps_compact,
    dumps_for_storage,
    dumps_indented,
    every_float,
    json_type,
    parse_json,
    shape,
)


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("  [1, 2] \n", [1, 2]),
        ('{"a": {"b": [true, null]}}', {"a": {"b": [True, None]}}),
        (b'{"k": "\xc3\xa9"}', {"k": "é"}),
        ("12345678901234567890123", 12345678901234567890123),
        ("[-98765432109876543210, 1.5]", [-98765432109876543210, 1.5]),
        ('"\\ud800"', "\ud800"),
        ('["\ud800"]', ["\ud800"]),
        ('{"a": 1, "a": 2}', {"a": 2}),
        ("-0.0", -0.0),
    ],
)
def test_it_parses_json_exactly(text: str | bytes, value: Any) -> None:
    assert parse_json(text) == value
    assert type(parse_json(text)) is type(value)


@pytest.mark.parametrize(
    "text",
    [
        "NaN",
        "[Infinity]",
        "-Infinity",
        "1e400",
        "[1, 2",
        "",
        "[1] [2]",
        "{'a': 1}",
        b"\xff",
        "[" * 100_000,
    ],
)
def test_anything_else_is_a_json_error(text: str | bytes) -> None:
    with pytest.raises(JsonError) as raised:
        parse_json(text)
    assert isinstance(raised.value, ValueError)


def test_compact_json_has_no_spaces_and_keeps_non_ascii() -> None:
    assert (
        dumps_compact({"a": [1, "é", None], "b": 2**70})
        == '{"a":[1,"é",null],"b":1180591620717411303424}'
    )


def test_indented_json_uses_two_spaces() -> None:
    assert dumps_indented({"a": [1]}) == '{\n  "a": [\n    1\n  ]\n}'
    assert dumps_indented([2**65]) == "[\n  36893488147419103232\n]"


def test_stored_json_is_valid_utf8_even_with_lone_surrogates() -> None:
    data = dumps_for_storage({"\ud800": "x\udfff"})
    data.decode("utf-8")  # strict
    assert parse_json(data) == {"\ud800": "x\udfff"}


@pytest.mark.parametrize(
    ("value", "name", "shown"),
    [
        ("héllo", "string", "string(5)"),
        (1, "number", "number"),
        (1.5, "number", "number"),
        (True, "boolean", "boolean"),
        (None, "null", "null"),
        ([1, 2, 3], "array", "array[3]"),
        ({"a": 1, "b": 2}, "object", "object{2}"),
        ({}, "object", "object{0}"),
    ],
)
def test_types_and_shapes_use_jsons_names(value: Any, name: str, shown: str) -> None:
    assert json_type(value) == name
    assert shape(value) == shown


def test_a_python_value_that_is_not_json_has_no_type() -> None:
    with pytest.raises(TypeError):
        json_type({1, 2})


@pytest.mark.parametrize(
    ("key", "shown"),
    [
        ("plain", "plain"),
        ("with space", "with space"),
        ("a|b", "a|b"),
        ("", '""'),
        (" edge", '" edge"'),
        ("line\nbreak", '"line\\nbreak"'),
        ("tab\t", '"tab\\t"'),
        ("del\x7f", '"del\x7f"'),
    ],
)
def test_a_key_is_quoted_only_when_it_could_break_its_line(key: str, shown: str) -> None:
    assert display_key(key) == shown
    assert "\n" not in display_key(key)


@settings(max_examples=300, deadline=None)
@given(json_values)
def test_every_written_form_reads_back_to_the_same_value(value: Any) -> None:
    assert parse_json(dumps_for_storage(value)) == value
    assert parse_json(dumps_compact(value)) == value
    assert parse_json(dumps_indented(value)) == value
    assert "\n" not in dumps_compact(value)


def floats_in(value: Any) -> list[float]:
    if isinstance(value, float):
        return [value]
    if isinstance(value, dict):
        value = list(value.values())
    if isinstance(value, list):
        return [number for item in value for number in floats_in(item)]
    return []


values_with_any_float = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=5),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=3), children, max_size=4)
    ),
    max_leaves=25,
)


@settings(max_examples=300, deadline=None)
@given(values_with_any_float, st.floats(min_value=0, max_value=1e6))
def test_every_float_holds_when_the_test_holds_for_each_float_found_by_a_plain_walk(value, bound):
    def small(number: float) -> bool:
        return abs(number) <= bound

    assert every_float(value, small) == all(small(n) for n in floats_in(value))
