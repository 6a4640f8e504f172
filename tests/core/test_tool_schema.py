"""Checking a model's arguments against a tool's JSON-Schema, with one-line messages."""

from __future__ import annotations

from typing import Any

import pytest

from core.agent.tool_schema import ArgumentsError, check_arguments, docstring_parts

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "path": {"type": "string"},
        "limit": {"type": "integer"},
        "ratio": {"type": "number"},
        "follow": {"type": "boolean"},
        "order": {"enum": ["asc", "desc"]},
        "names": {"type": "array", "items": {"type": "string"}},
        "since": {"type": ["string", "null"]},
        "options": {
            "type": "object",
            "properties": {"depth": {"type": "integer"}},
            "required": ["depth"],
        },
    },
    "required": ["path"],
    "additionalProperties": False,
}


def problems(arguments: Any) -> str:
    with pytest.raises(ArgumentsError) as caught:
        check_arguments(SCHEMA, arguments)
    return str(caught.value)


def test_arguments_that_fit_pass() -> None:
    check_arguments(
        SCHEMA,
        {
            "path": "a",
            "limit": 3,
            "ratio": 0.5,
            "follow": True,
            "order": "asc",
            "names": ["x", "y"],
            "since": None,
            "options": {"depth": 2},
        },
    )


def test_a_missing_required_key_is_named() -> None:
    assert problems({}) == "missing required 'path'"


def test_a_wrong_type_names_the_key_the_wanted_type_and_the_given_one() -> None:
    assert problems({"path": 3}) == "'path' must be string, got number"


def test_a_boolean_is_not_an_integer() -> None:
    assert problems({"path": "a", "limit": True}) == "'limit' must be integer, got boolean"


def test_an_integer_is_a_number() -> None:
    check_arguments(SCHEMA, {"path": "a", "ratio": 2})


def test_a_float_is_not_an_integer() -> None:
    assert problems({"path": "a", "limit": 2.5}) == "'limit' must be integer, got number"


def test_a_value_outside_an_enum_lists_the_allowed_ones() -> None:
    expected = """'order' must be one of "asc", "desc", got "up\""""
    assert problems({"path": "a", "order": "up"}) == expected


def test_array_items_are_checked_with_their_index() -> None:
    assert problems({"path": "a", "names": ["x", 2]}) == "'names'[1] must be string, got number"


def test_a_list_of_types_allows_each() -> None:
    check_arguments(SCHEMA, {"path": "a", "since": "2025"})
    assert problems({"path": "a", "since": 1}) == "'since' must be string or null, got number"


def test_nested_objects_are_checked() -> None:
    assert problems({"path": "a", "options": {}}) == "missing required 'options'.'depth'"


def test_unexpected_keys_are_named_with_the_expected_ones() -> None:
    assert problems({"path": "a", "pth": "b"}) == (
        "unexpected 'pth' (expected: path, limit, ratio, follow, order, names, since, options)"
    )


def test_every_problem_is_reported_on_one_line() -> None:
    message = problems({"limit": "ten", "follow": "yes"})
    assert message == (
        "missing required 'path'; 'limit' must be integer, got string; "
        "'follow' must be boolean, got string"
    )


def test_arguments_that_are_not_an_object_say_so() -> None:
    assert problems([1, 2]) == "arguments must be object, got array"


def test_arguments_that_are_raw_text_show_its_start() -> None:
    assert problems('{"path": "a"') == 'arguments are not a JSON object: {"path": "a"'


def test_a_schema_that_allows_more_keys_accepts_them() -> None:
    check_arguments({"type": "object", "properties": {}}, {"anything": 1})


def test_docstring_parts_reads_google_style_args() -> None:
    description, parameters = docstring_parts(
        """Search files.

        Args:
            pattern (str): a regex,
                matched per line
            path: where to look

        Returns:
            matching lines
        """
    )
    assert description == "Search files."
    assert parameters == {"pattern": "a regex, matched per line", "path": "where to look"}
