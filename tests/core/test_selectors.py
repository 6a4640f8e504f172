"""Selectors (docs/selectors.md): one parser and one evaluator; every malformed or misapplied
selector is a one-line SelectorError that says what was expected, and nothing else ever escapes."""

from __future__ import annotations

import re
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core.content import Structured, Text
from core.selectors import (
    Grep,
    GrepView,
    Key,
    Lines,
    LinesView,
    Selector,
    SelectorError,
    Slice,
    ValueView,
    evaluate,
    parse_selector,
)

TEXT = Text("".join(f"line {n}\n" for n in range(1, 101)))
ARRAY = Structured([{"id": n, "name": f"item {n}"} for n in range(20)])
OBJECT = Structured(
    {
        "results": [10, 11, 12, 13, 14],
        "log": "start\nERROR one\nok\nERROR two\nend",
        "meta": {"inner": {"deep": True}},
        "a|b": "pipe",
        " padded ": "spaces",
        "": "empty key",
        "count": 3,
    }
)


def one_step(text: str) -> Any:
    selector = parse_selector(text)
    assert len(selector.steps) == 1
    return selector.steps[0]


def error_of(selector: str, content: Text | Structured | None = None) -> str:
    with pytest.raises(SelectorError) as raised:
        if content is None:
            parse_selector(selector)
        else:
            evaluate(selector, content)
    message = str(raised.value)
    assert message and "\n" not in message
    return message


# -- parsing --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "step"),
    [
        ("lines:20-50", Lines(20, 50)),
        ("lines:7", Lines(7, 7, single=True)),
        ("lines:20-", Lines(20, None)),
        ("lines: 20 - 50 ", Lines(20, 50)),
        ("LINES:3", Lines(3, 3, single=True)),
        ("slice:3..8", Slice(3, 8)),
        ("slice:3..", Slice(3, None)),
        ("slice:..8", Slice(None, 8)),
        ("slice:3..=8", Slice(3, 8, inclusive=True)),
        ("slice:..", Slice(None, None)),
        ("slice:..=0", Slice(None, 0, inclusive=True)),
        ("slice:4..4", Slice(4, 4)),
        ("key:results", Key("results")),
        ("key:  spaced name  ", Key("spaced name")),
        ("key:123", Key("123")),
        ('key:"a|b"', Key("a|b")),
        ('key:" padded "', Key(" padded ")),
        ('key:""', Key("")),
        ('key:"caf\\u00e9"', Key("café")),
        ("grep:ERROR", Grep("ERROR", re.compile("ERROR"))),
        ("grep:error|warning", Grep("error|warning", re.compile("error|warning"))),
        ('grep:" x "', Grep(" x ", re.compile(" x "))),
        (r"grep:^\d+$", Grep(r"^\d+$", re.compile(r"^\d+$"))),
    ],
)
def test_every_form_parses(text: str, step: Any) -> None:
    assert one_step(text) == step


@pytest.mark.parametrize("blank", [None, "", "   ", "\n"])
def test_no_selector_is_the_empty_selector(blank: str | None) -> None:
    assert parse_selector(blank) == Selector()
    assert not parse_selector(blank)


def test_steps_chain_with_a_pipe_and_whitespace_around_it_is_ignored() -> None:
    assert parse_selector("key:results|slice:0..5") == parse_selector("key:results  |  slice:0..5")
    assert parse_selector("key:results | slice:0..5").steps == (Key("results"), Slice(0, 5))
    assert parse_selector("key:log | grep:ERROR | lines:1").steps[1] == Grep(
        "ERROR", re.compile("ERROR")
    )


def test_a_quoted_key_may_hold_a_pipe_in_a_chain() -> None:
    assert parse_selector('key:"a|b" | lines:1').steps == (Key("a|b"), Lines(1, 1, single=True))


def test_a_regex_keeps_its_pipe_until_the_next_step() -> None:
    selector = parse_selector("grep:foo|bar | lines:1-2")
    assert selector.steps == (Grep("foo|bar", re.compile("foo|bar")), Lines(1, 2))


@pytest.mark.parametrize(
    ("text", "canonical"),
    [
        ("lines:20-50", "lines:20-50"),
        ("lines: 7", "lines:7"),
        ("lines:20 -", "lines:20-"),
        ("slice:..", "slice:.."),
        ("slice: 3 ..= 8", "slice:3..=8"),
        ("key:results", "key:results"),
        ('key:"a|b"', 'key:"a|b"'),
        ('key:" padded "', 'key:" padded "'),
        ('key:""', 'key:""'),
        ('key:"\\"quoted\\""', 'key:"\\"quoted\\""'),
        ("grep:error|warning", 'grep:"error|warning"'),
        ("key:results|slice:0..5", "key:results | slice:0..5"),
        ("  lines:1-9 |grep:x  ", "lines:1-9 | grep:x"),
    ],
)
def test_the_canonical_form_round_trips(text: str, canonical: str) -> None:
    assert str(parse_selector(text)) == canonical
    assert parse_selector(canonical) == parse_selector(text)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("lines:", "lines: expects A-B, A or A-"),
        ("lines:a", "lines: expects A-B, A or A-"),
        ("lines:1-2-3", "lines: expects A-B, A or A-"),
        ("lines:-5", "lines: expects A-B, A or A-"),
        ("lines:1.5", "lines: expects A-B, A or A-"),
        ("lines:0", "line numbers start at 1"),
        ("lines:0-5", "line numbers start at 1"),
        ("lines:5-3", "the end is before the start"),
        ("slice:", "slice: expects a range"),
        ("slice:1", "slice: expects a range"),
        ("slice:a..b", "slice: expects a range"),
        ("slice:1...3", "slice: expects a range"),
        ("slice:-1..2", "slice: expects a range"),
        ("slice:5..2", "the start is after the end"),
        ("slice:3..=1", "the start is after the end"),
        ("slice:..=", "..= needs an end"),
        ("key:", "key: expects a key name"),
        ('key:"unterminated', "key: bad quoted string"),
        ('key:"a" extra', "expected '|' or the end after the quoted string"),
        ("key:5.0e", None),  # a bare key: fine
        ("grep:", "grep: expects a regex"),
        ("grep:(", "grep: invalid regex '('"),
        ("grep:[a-", "grep: invalid regex"),
        ("grep:a{1001}", "grep: invalid regex 'a{1001}': invalid repetition size: {1001}"),
        (
            "foo:bar",
            "unknown selector 'foo:'; expected lines:A-B, slice:A..B, key:name, keys:A..B or grep:",
        ),
        ("bogus", "expected lines:A-B, slice:A..B, key:name, keys:A..B or grep:regex; got 'bogus'"),
        ("|", "expected lines:A-B"),
        ("| lines:1", "expected lines:A-B"),
        ("lines:1 |", "the selector ends with '|'; expected lines:A-B"),
        ("lines:1 || lines:2", "expected lines:A-B"),
        ("lines:1 | nope", "expected lines:A-B"),
        ("key:a | 5", "expected lines:A-B"),
    ],
)
def test_every_malformed_form_says_what_was_expected(text: str, expected: str | None) -> None:
    if expected is None:
        parse_selector(text)
        return
    assert expected in error_of(text)


def test_an_unterminated_quote_says_what_was_expected() -> None:
    assert "JSON string" in error_of('key:"unterminated')


def test_numbers_too_long_for_int_are_still_selector_errors_or_clamped() -> None:
    huge = "9" * 5000
    assert parse_selector(f"slice:0..{huge}")  # clamped when evaluated
    assert evaluate(f"slice:0..{huge}", ARRAY) == ValueView(ARRAY.value, 0, 20)
    assert "past the end" in error_of(f"lines:{huge}", TEXT)
    assert evaluate(f"lines:99-{huge}", TEXT) == LinesView(TEXT.text, 99, 100, 100)


def test_only_ascii_digits_are_numbers() -> None:
    error_of("lines:\u0663")  # ARABIC-INDIC DIGIT THREE
    error_of("slice:\u0661..\u0662")


def test_a_selector_must_be_a_string() -> None:
    with pytest.raises(SelectorError, match="must be a string"):
        parse_selector(5)  # type: ignore[arg-type]


# -- lines: ---------------------------------------------------------------------------------


def test_lines_selects_inclusive_one_based_ranges() -> None:
    view = evaluate("lines:3-5", TEXT)
    assert view == LinesView(TEXT.text, 3, 5, 100)
    assert view.lines() == ["line 3", "line 4", "line 5"]


def test_lines_selects_one_line_or_to_the_end() -> None:
    assert evaluate("lines:7", TEXT).lines() == ["line 7"]
    assert evaluate("lines:98-", TEXT).lines() == ["line 98", "line 99", "line 100"]


def test_it_clamps_end_past_last_line() -> None:
    view = evaluate("lines:99-500", TEXT)
    assert (view.first, view.last, view.total) == (99, 100, 100)
    assert view.lines() == ["line 99", "line 100"]


def test_a_start_past_the_end_is_an_error() -> None:
    assert (
        error_of("lines:101", TEXT) == "lines:101: line 101 is past the end; the text has 100 lines"
    )
    assert "the text has 0 lines" in error_of("lines:1", Text(""))


def test_lines_use_the_line_model() -> None:
    view = evaluate("lines:2-3", Text("a\r\nb\r\n\r\nc"))
    assert view.lines() == ["b", ""]


def test_lines_applies_to_a_string_value_reached_by_key() -> None:
    view = evaluate("key:log | lines:2-3", OBJECT)
    assert isinstance(view, LinesView)
    assert view.lines() == ["ERROR one", "ok"]


def test_lines_after_lines_narrows_the_range() -> None:
    view = evaluate("lines:10-20 | lines:15-30", TEXT)
    assert (view.first, view.last) == (15, 20)
    assert "outside the lines in view (10-20)" in error_of("lines:10-20 | lines:25", TEXT)


# -- slice: ---------------------------------------------------------------------------------


def test_slice_is_zero_based_and_half_open() -> None:
    view = evaluate("slice:2..4", ARRAY)
    assert view == ValueView(ARRAY.value[2:4], 2, 20)


def test_slice_inclusive_and_open_ranges() -> None:
    assert evaluate("slice:2..=4", ARRAY).value == ARRAY.value[2:5]
    assert evaluate("slice:18..", ARRAY).value == ARRAY.value[18:]
    assert evaluate("slice:..2", ARRAY).value == ARRAY.value[:2]
    assert evaluate("slice:..", ARRAY).value == ARRAY.value


def test_slice_clamps_out_of_range_ends() -> None:
    assert evaluate("slice:15..100", ARRAY) == ValueView(ARRAY.value[15:], 15, 20)
    assert evaluate("slice:50..60", ARRAY) == ValueView([], 20, 20)
    assert evaluate("slice:0..=99", ARRAY).value == ARRAY.value


def test_slice_after_slice_counts_in_the_original_array() -> None:
    view = evaluate("slice:5..15 | slice:8..12", ARRAY)
    assert view == ValueView(ARRAY.value[8:12], 8, 20)


def test_slice_applies_to_an_array_reached_by_key() -> None:
    assert evaluate("key:results | slice:1..3", OBJECT).value == [11, 12]


# -- key: -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("selector", "value"),
    [
        ("key:results", [10, 11, 12, 13, 14]),
        ('key:"a|b"', "pipe"),
        ('key:" padded "', "spaces"),
        ('key:""', "empty key"),
        ("key:count", 3),
        ("key:meta | key:inner | key:deep", True),
    ],
)
def test_key_selects_the_exact_key(selector: str, value: Any) -> None:
    assert evaluate(selector, OBJECT).value == value


def test_a_missing_key_lists_the_keys() -> None:
    message = error_of("key:nope", OBJECT)
    assert message.startswith("key:nope: no such key; the keys are: results, log, meta, a|b")


def test_a_missing_key_lists_at_most_ten_keys() -> None:
    message = error_of("key:nope", Structured({f"k{n}": n for n in range(25)}))
    assert message.endswith("k9 (+15 more)")


def test_a_key_of_an_empty_object_says_there_are_none() -> None:
    assert error_of("key:a", Structured({})) == "key:a: no such key; the object has no keys"


def test_key_matching_is_exact() -> None:
    assert "no such key" in error_of("key:Results", OBJECT)
    assert "no such key" in error_of("key:padded", OBJECT)


# -- grep: ----------------------------------------------------------------------------------


def test_grep_numbers_the_matching_lines() -> None:
    view = evaluate(r"grep:line 9\d", TEXT)
    assert isinstance(view, GrepView)
    assert view.matches == [(n, f"line {n}") for n in range(90, 100)]


def test_grep_matches_per_line_with_an_re2_regex() -> None:
    view = evaluate("grep:^ERROR|^end$", Text("start\r\nERROR one\nok\nERROR two\nend\n"))
    assert view.matches == [(2, "ERROR one"), (4, "ERROR two"), (5, "end")]


def test_grep_without_matches_is_empty() -> None:
    assert evaluate("grep:nothing here", TEXT).matches == []


def test_grep_after_lines_keeps_the_texts_line_numbers() -> None:
    view = evaluate("lines:40-60 | grep:5", TEXT)
    assert [n for n, _ in view.matches] == [45, 50, 51, 52, 53, 54, 55, 56, 57, 58, 59]


def test_grep_in_a_string_value() -> None:
    assert evaluate("key:log | grep:ERROR", OBJECT).matches == [(2, "ERROR one"), (4, "ERROR two")]


# -- misapplied steps -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("selector", "content", "message"),
    [
        (
            "lines:1-10",
            ARRAY,
            "lines: applies to text; this blob is json_array — "
            "try slice:0..10, or key:id for that key of every entry",
        ),
        (
            "grep:x",
            ARRAY,
            "grep: applies to text; this blob is json_array — "
            "try slice:0..10, or key:id for that key of every entry",
        ),
        (
            "lines:1",
            OBJECT,
            "lines: applies to text; this blob is json_object — try key:results",
        ),
        (
            "slice:0..3",
            TEXT,
            "slice: applies to a JSON array; this blob is text — try lines:1-40 or grep:<regex>",
        ),
        (
            "key:a",
            TEXT,
            "key: applies to a JSON object; this blob is text — try lines:1-40 or grep:<regex>",
        ),
        (
            "keys:0..3",
            Structured([1, 2, 3]),
            "keys: applies to a JSON object; this blob is json_array — try slice:0..10",
        ),
        (
            "slice:0..1",
            OBJECT,
            "slice: applies to a JSON array; this blob is json_object — try key:results",
        ),
        (
            "key:a",
            Structured(5),
            "key: applies to a JSON object; this blob is json_number — "
            "it has no parts to select; inspect it without a selector",
        ),
        (
            "key:results | lines:1",
            OBJECT,
            "lines: applies to text; key:results gives json_array — try slice:0..10",
        ),
        (
            "key:count | slice:0..1",
            OBJECT,
            "slice: applies to a JSON array; key:count gives json_number — "
            "it has no parts to select; inspect it without a selector",
        ),
        (
            "grep:x | lines:1",
            TEXT,
            "lines: applies to text; grep:x gives grep result — grep: must be the last step",
        ),
    ],
)
def test_a_misapplied_step_names_the_kind_and_what_fits(
    selector: str, content: Text | Structured, message: str
) -> None:
    assert error_of(selector, content) == message


def test_evaluate_takes_a_parsed_selector_too() -> None:
    assert evaluate(parse_selector("slice:0..1"), ARRAY).value == ARRAY.value[:1]
    assert evaluate(None, TEXT) == LinesView(TEXT.text, 1, 100, 100)
    assert evaluate("", ARRAY) == ValueView(ARRAY.value)


# -- properties -----------------------------------------------------------------------------

fragments = st.sampled_from(
    [
        "lines:", "slice:", "key:", "grep:", "LINES:", "|", " | ", "..", "..=", "-", ":",
        "0", "1", "3", "42", "9" * 30, "9" * 5000, '"', '\\"', "\\", "a", "b|c", " ", "\t",
        "\n", "(", ")", "[", "*", "+", "?", "{2}", "é", "\ud800", "\u0663", "\x00", "results",
        "log", "null", "{", "}",
    ]
)  # fmt: skip
selector_texts = st.one_of(st.text(), st.lists(fragments, max_size=12).map("".join))
samples = [
    TEXT,
    Text(""),
    Text("a\r\nb\n\nc"),
    ARRAY,
    Structured([]),
    OBJECT,
    Structured({}),
    Structured("x\ny"),
    Structured(None),
]


@settings(max_examples=500, deadline=None)
@given(selector_texts)
def test_parsing_any_string_gives_a_selector_or_a_selector_error(text: str) -> None:
    try:
        selector = parse_selector(text)
    except SelectorError as error:
        assert "\n" not in str(error)
        return
    assert isinstance(selector, Selector)
    # The canonical form parses back to the same selector.
    assert parse_selector(str(selector)) == selector
    assert str(parse_selector(str(selector))) == str(selector)


@settings(max_examples=500, deadline=None)
@given(selector_texts, st.sampled_from(samples))
def test_evaluating_any_string_gives_a_view_or_a_selector_error(
    text: str, content: Text | Structured
) -> None:
    try:
        view = evaluate(text, content)
    except SelectorError as error:
        assert "\n" not in str(error)
        return
    assert isinstance(view, LinesView | ValueView | GrepView)


def test_a_pattern_that_backtracks_exponentially_in_python_is_linear_in_re2() -> None:
    # (a|aa)+$ takes Python's re minutes on this line; RE2 has no time limit to need.
    text = Text("fine\n" + "a" * 60 + "b\n" + "a" * 30 + "\n")
    assert evaluate("grep:(a|aa)+$", text).matches == [(3, "a" * 30)]


def test_a_step_name_after_a_regex_pipe_is_recognised_in_any_case() -> None:
    selector = parse_selector("grep:a|LINES:1")
    assert [type(step).__name__ for step in selector.steps] == ["Grep", "Lines"]


@pytest.mark.parametrize(
    ("pattern", "reason"),
    [
        (r"(a)\1", r"invalid escape sequence: \1"),  # no backreferences
        ("(?=a)", "invalid perl operator: (?="),  # no lookahead
        ("(?<!a)b", "invalid perl operator: (?<"),  # no lookbehind
        ("(?R)", "invalid perl operator: (?R"),  # no recursion
        ("a**", "bad repetition operator: **"),
    ],
)
def test_grep_takes_re2_syntax_only(pattern: str, reason: str) -> None:
    with pytest.raises(SelectorError, match="grep: invalid regex") as raised:
        parse_selector(f"grep:{pattern}")
    assert reason in str(raised.value)


# -- lone surrogates: JSON's escape names one, a raw one is not text ------------------------


@pytest.mark.parametrize(
    "selector", ["key:\ud800", 'key:"\ud800"', "grep:a\udcff", "lines:1\udfff"]
)
def test_it_refuses_a_raw_lone_surrogate_and_shows_it_escaped(selector: str) -> None:
    message = error_of(selector)
    assert "lone surrogate" in message
    assert message.encode("utf-8")  # no surrogate left in the message itself
    assert re.search(r"\\ud[89a-f][0-9a-f]{2} at column \d+", message)


def test_a_json_escape_in_a_quoted_key_names_a_key_that_holds_a_lone_surrogate() -> None:
    content = Structured({"\ud800": "found", "b": 1})
    assert evaluate('key:"\\ud800"', content) == ValueView("found")


def test_the_canonical_form_writes_lone_surrogates_as_json_escapes() -> None:
    for selector in (Selector((Key("a\ud800"),)), parse_selector('grep:"x\\udc00"')):
        canonical = str(selector)
        assert canonical.isascii()
        assert parse_selector(canonical) == selector


def test_an_error_about_a_key_with_a_lone_surrogate_can_be_encoded() -> None:
    message = error_of('key:"\\udc00"', Structured({"\ud800": 1}))
    assert message == 'key:"\\udc00": no such key; the keys are: \\ud800'
    message = error_of("lines:1", Structured({"\ud800": 1}))
    assert message.endswith('try key:"\\ud800"')


# -- key: over an array's entries -------------------------------------------------------------

PEOPLE = Structured(
    [
        {"name": "ada", "user": {"login": "ada1"}},
        {"name": None, "user": None},  # null is a value: present
        {"id": 3},  # no name
        "not an object",
        {"name": "eve", "user": {"id": 5}},
    ]
)


def test_key_over_an_array_gives_each_entrys_value_and_counts_the_missing() -> None:
    view = evaluate("key:name", PEOPLE)
    assert view == ValueView(["ada", None, None, None, "eve"], missing=2)


def test_key_over_a_slice_keeps_the_slices_place_in_the_array() -> None:
    view = evaluate("slice:1..4 | key:name", PEOPLE)
    assert view == ValueView([None, None, None], start=1, total=5, missing=2)
    assert evaluate("slice:1..4 | key:name | slice:2..3", PEOPLE).value == [None]


def test_keys_chain_over_the_values_of_the_last() -> None:
    assert evaluate("key:user | key:login", PEOPLE) == ValueView(
        ["ada1", None, None, None, None], missing=4
    )
    assert evaluate("key:results | key:x", OBJECT) == ValueView([None] * 5, missing=5)


def test_steps_that_do_not_fit_the_values_say_so() -> None:
    assert error_of("key:name | lines:1", PEOPLE) == (
        "lines: applies to text; key:name gives json_array — try slice:0..10"
    )
    assert error_of("key:user | keys:0..1", PEOPLE).startswith("keys: applies to a JSON object")
