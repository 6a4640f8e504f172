"""Summaries (docs/promotion.md): byte-exact text, array, object and scalar summaries under 400
bytes.

The width rule is checked against a small reference model written here from the spec:
shown lines are cut to one common width w, the largest that makes the summary fit; a cut
line keeps its longest prefix of at most w-3 bytes on a character boundary, then "…".
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core.agent.policy import Policy
from core.content import Structured, Text, decode_text, encode_text
from core.json_values import display_key, dumps_compact, json_type, shape
from core.lines import split_lines
from core.summary import _fit, _Shown, summarize

BLOB_ID = uuid.UUID("0190f5e2-7c1a-7b3e-9c4d-123456789abc")
REF = f"[blob:{BLOB_ID}]"
LIMIT = 400


def size(text: str) -> int:
    return len(text.encode("utf-8", "surrogatepass"))


# -- the reference model of the width rule --------------------------------------------------


def cut(line: str, width: int) -> str:
    """*line* as shown at *width*: whole if it fits, else a prefix of <= width-3 bytes + "…"."""
    if size(line) <= width:
        return line
    kept, used = [], 0
    for char in line:
        if used + size(char) > width - 3:
            break
        kept.append(char)
        used += size(char)
    return "".join(kept) + "…"


def render(parts: list[tuple[str, bool]], width: int | None) -> str:
    """Join (line, may_be_cut) parts, cutting the cuttable ones to *width* (None: no cut)."""
    return "\n".join(
        cut(line, width) if cuttable and width is not None else line for line, cuttable in parts
    )


def fitted(parts: list[tuple[str, bool]]) -> tuple[str, int | None]:
    """The summary the spec asks for, and the width used (None when nothing is cut)."""
    whole = render(parts, None)
    if size(whole) <= LIMIT:
        return whole, None
    # The rendered size only grows with the width, so bisect for the largest that fits.
    low, high = 0, LIMIT
    while low < high:
        middle = (low + high + 1) // 2
        if size(render(parts, middle)) <= LIMIT:
            low = middle
        else:
            high = middle - 1
    return render(parts, low), low


def text_parts(text: str) -> list[tuple[str, bool]]:
    lines = split_lines(text)
    parts = [(f"{REF} text | {len(lines)} lines", False), ("── head ──", False)]
    parts += [(line, True) for line in lines[:5]]
    if len(lines) > 5:
        parts.append(("── tail ──", False))
        parts += [(line, True) for line in lines[5:][-3:]]
    return parts


def array_parts(items: list[Any]) -> list[tuple[str, bool]]:
    if not items:
        schema = "(empty)"
    elif isinstance(items[0], dict):
        schema = ", ".join(f"{display_key(k)}: {json_type(v)}" for k, v in items[0].items())
        schema = schema or "(empty)"
    else:
        schema = json_type(items[0])
    parts = [(f"{REF} json_array | {len(items)} entries", False), ("── schema ──", False)]
    parts.append((schema, True))
    if items:
        parts.append(("── head ──", False))
        parts += [(dumps_compact(item), True) for item in items[:2]]
    return parts


def assert_width_rule(summary: str, parts: list[tuple[str, bool]]) -> None:
    expected, width = fitted(parts)
    assert summary == expected
    assert size(summary) <= LIMIT
    if width is not None:
        assert size(render(parts, width + 1)) > LIMIT, "a wider cut would still have fit"


# -- text -----------------------------------------------------------------------------------


def numbered(count: int) -> str:
    return "".join(f"line {n}\n" for n in range(1, count + 1))


def test_a_short_text_shows_all_its_lines_without_a_tail() -> None:
    assert summarize(BLOB_ID, Text("alpha\nbeta\r\ngamma")) == (
        "[blob:0190f5e2-7c1a-7b3e-9c4d-123456789abc] text | 3 lines\n── head ──\nalpha\nbeta\ngamma"
    )


def test_five_lines_have_no_tail() -> None:
    assert summarize(BLOB_ID, Text(numbered(5))) == (
        f"{REF} text | 5 lines\n── head ──\nline 1\nline 2\nline 3\nline 4\nline 5"
    )


@pytest.mark.parametrize(
    ("count", "tail"),
    [
        (6, ["line 6"]),
        (7, ["line 6", "line 7"]),
        (8, ["line 6", "line 7", "line 8"]),
        (9, ["line 7", "line 8", "line 9"]),
        (1000, ["line 998", "line 999", "line 1000"]),
    ],
)
def test_the_tail_shows_the_last_min_3_n_minus_5_lines(count: int, tail: list[str]) -> None:
    head = "line 1\nline 2\nline 3\nline 4\nline 5"
    assert summarize(BLOB_ID, Text(numbered(count))) == (
        f"{REF} text | {count} lines\n── head ──\n{head}\n── tail ──\n" + "\n".join(tail)
    )


def test_an_empty_text_has_an_empty_head() -> None:
    assert summarize(BLOB_ID, Text("")) == f"{REF} text | 0 lines\n── head ──"


def test_blank_lines_are_shown_as_empty_lines() -> None:
    assert summarize(BLOB_ID, Text("a\n\nb\n")) == f"{REF} text | 3 lines\n── head ──\na\n\nb"


def test_the_id_is_lowercase_and_hyphenated() -> None:
    summary = summarize(uuid.UUID("0190F5E2-7C1A-7B3E-9C4D-123456789ABC"), Text("x"))
    assert summary.startswith("[blob:0190f5e2-7c1a-7b3e-9c4d-123456789abc] ")


def test_the_summary_has_no_trailing_newline() -> None:
    assert not summarize(BLOB_ID, Text(numbered(20))).endswith("\n")


def test_it_cuts_one_long_line_to_the_room_left() -> None:
    # 58 (header) + 18 (marker) + 1 + 1 ("a", "c") + 4 newlines = 82 bytes; 318 remain.
    summary = summarize(BLOB_ID, Text("a\n" + "b" * 1000 + "\nc"))
    assert summary == f"{REF} text | 3 lines\n── head ──\na\n" + "b" * 315 + "…\nc"
    assert size(summary) == 400


def test_it_cuts_two_byte_characters_on_a_boundary() -> None:
    # 8 lines of 600 bytes: 104 fixed bytes leave 37 per line. Width 38 also fits (17
    # characters of 2 bytes still make 34 <= 35 bytes); width 39 would keep 18 and overflow.
    lines = ["é" * 300] * 8
    summary = summarize(BLOB_ID, Text("\n".join(lines)))
    shown = "é" * 17 + "…"
    assert summary == "\n".join(
        [f"{REF} text | 8 lines", "── head ──", *[shown] * 5, "── tail ──", *[shown] * 3]
    )
    assert size(summary) == 400


def test_it_cuts_four_byte_characters_on_a_boundary() -> None:
    # The largest width that fits is 38; a 4-byte boundary keeps 8 characters (32 bytes),
    # so the summary ends up shorter than the limit rather than splitting a character.
    lines = ["\U0001f600" * 100] * 8
    summary = summarize(BLOB_ID, Text("\n".join(lines)))
    shown = "\U0001f600" * 8 + "…"
    assert summary == "\n".join(
        [f"{REF} text | 8 lines", "── head ──", *[shown] * 5, "── tail ──", *[shown] * 3]
    )
    assert size(summary) == 104 + 8 * 35
    assert_width_rule(summary, text_parts("\n".join(lines)))


def test_short_lines_are_not_cut_while_long_ones_are() -> None:
    text = "ok\n" + "x" * 500 + "\nfine\n" + "€" * 200 + "\n" + "y" * 90 + "\n6\n7\n" + "z" * 300
    summary = summarize(BLOB_ID, Text(text))
    shown = summary.split("\n")
    assert shown[2] == "ok"
    assert shown[4] == "fine"
    assert shown[-2] == "7"
    assert all(line.endswith("…") for line in (shown[3], shown[5], shown[-1]))
    assert_width_rule(summary, text_parts(text))


def test_the_header_is_never_cut() -> None:
    text = "w" * 5000 + "\n" * 1_000_000
    summary = summarize(BLOB_ID, Text(text))
    assert summary.split("\n")[0] == f"{REF} text | 1000000 lines"
    assert size(summary) <= LIMIT


def test_cut_lines_end_with_an_ellipsis_of_three_bytes() -> None:
    summary = summarize(BLOB_ID, Text("q" * 2000))
    line = summary.split("\n")[2]
    assert line.endswith("…")
    assert size(line) == 400 - size(f"{REF} text | 1 lines\n── head ──\n")


def test_a_custom_policy_sets_head_tail_and_limit() -> None:
    policy = Policy(head_lines=2, tail_lines=1, summary_limit=150)
    summary = summarize(BLOB_ID, Text(numbered(10)), policy)
    assert summary == f"{REF} text | 10 lines\n── head ──\nline 1\nline 2\n── tail ──\nline 10"


# -- JSON arrays ----------------------------------------------------------------------------


def test_an_array_of_objects_shows_the_schema_of_the_first() -> None:
    items = [
        {"name": "a", "n": 1, "tags": [], "x": None, "o": {}, "ok": True, "f": 1.5},
        {"name": "b", "other": 2},
        {"name": "c"},
    ]
    assert summarize(BLOB_ID, Structured(items)) == (
        "[blob:0190f5e2-7c1a-7b3e-9c4d-123456789abc] json_array | 3 entries\n"
        "── schema ──\n"
        "name: string, n: number, tags: array, x: null, o: object, ok: boolean, f: number\n"
        "── head ──\n"
        '{"name":"a","n":1,"tags":[],"x":null,"o":{},"ok":true,"f":1.5}\n'
        '{"name":"b","other":2}'
    )


@pytest.mark.parametrize(
    ("items", "schema"),
    [
        ([1, {"a": 1}], "number"),
        (["s", "t"], "string"),
        ([[1], [2]], "array"),
        ([None], "null"),
        ([False, 1], "boolean"),
    ],
)
def test_a_non_object_first_element_gives_its_type(items: list[Any], schema: str) -> None:
    summary = summarize(BLOB_ID, Structured(items))
    assert summary.split("\n")[:3] == [
        f"{REF} json_array | {len(items)} entries",
        "── schema ──",
        schema,
    ]


def test_a_one_element_array_shows_one_head_line() -> None:
    assert summarize(BLOB_ID, Structured([{"k": "é"}])) == (
        f'{REF} json_array | 1 entries\n── schema ──\nk: string\n── head ──\n{{"k":"é"}}'
    )


def test_an_empty_array_has_an_empty_schema_and_no_head() -> None:
    assert (
        summarize(BLOB_ID, Structured([])) == f"{REF} json_array | 0 entries\n── schema ──\n(empty)"
    )


def test_a_key_with_a_line_break_does_not_split_the_schema_line() -> None:
    summary = summarize(BLOB_ID, Structured([{"a\nb": 1, "c": 2}]))
    assert summary.split("\n")[2] == '"a\\nb": number, c: number'


def test_long_elements_are_cut_to_a_common_width() -> None:
    items = [{"text": "x" * 1000}, {"text": "Ω" * 1000}, {"text": "z"}]
    summary = summarize(BLOB_ID, Structured(items))
    lines = summary.split("\n")
    assert lines[2] == "text: string"
    assert lines[4].startswith('{"text":"xxx') and lines[4].endswith("…")
    assert lines[5].startswith('{"text":"ΩΩΩ') and lines[5].endswith("…")
    assert_width_rule(summary, array_parts(items))


def test_a_long_schema_line_is_cut_too() -> None:
    items = [{f"field_{n:03d}": n for n in range(200)}]
    summary = summarize(BLOB_ID, Structured(items))
    assert summary.split("\n")[2].startswith("field_000: number, field_001: number")
    assert summary.split("\n")[2].endswith("…")
    assert_width_rule(summary, array_parts(items))


# -- JSON objects ---------------------------------------------------------------------------


def test_an_object_shows_one_shape_per_key_in_document_order() -> None:
    value = {
        "title": "héllo",
        "items": [1, 2, 3],
        "meta": {"a": 1, "b": 2},
        "count": 42,
        "ratio": 0.5,
        "ok": False,
        "missing": None,
    }
    assert summarize(BLOB_ID, Structured(value)) == (
        "[blob:0190f5e2-7c1a-7b3e-9c4d-123456789abc] json_object | 7 keys\n"
        "── keys ──\n"
        "title: string(5)\n"
        "items: array[3]\n"
        "meta: object{2}\n"
        "count: number\n"
        "ratio: number\n"
        "ok: boolean\n"
        "missing: null"
    )


def test_an_empty_object_has_no_key_lines() -> None:
    assert summarize(BLOB_ID, Structured({})) == f"{REF} json_object | 0 keys\n── keys ──"


def test_a_key_with_a_line_break_is_quoted_on_its_line() -> None:
    summary = summarize(BLOB_ID, Structured({"a\nb": "x"}))
    assert summary.split("\n")[2:] == ['"a\\nb": string(1)']


def test_too_many_keys_end_with_a_count_of_the_rest() -> None:
    # 84 fixed bytes; each "key_NN: string(3)" line takes 18; "… +14 more keys" 18 more.
    value = {f"key_{n:02d}": "abc" for n in range(30)}
    summary = summarize(BLOB_ID, Structured(value))
    assert summary == "\n".join(
        [f"{REF} json_object | 30 keys", "── keys ──"]
        + [f"key_{n:02d}: string(3)" for n in range(16)]
        + ["… +14 more keys"]
    )
    assert size(summary) == 390  # a 17th key line would make it 408


def test_long_key_lines_are_cut_to_80_bytes_when_keys_overflow() -> None:
    value = {"ключ" * 30 + str(n): "v" for n in range(10)}
    summary = summarize(BLOB_ID, Structured(value))
    lines = summary.split("\n")
    key_lines = lines[2:-1]
    assert lines[-1] == f"… +{10 - len(key_lines)} more keys"
    for line, key in zip(key_lines, value, strict=False):
        assert line == cut(f"{key}: string(1)", 80)
        assert size(line) <= 80
    assert size(summary) <= LIMIT
    assert size(summary) + size(key_lines[0]) + 1 > LIMIT  # one more line would not fit


def test_key_lines_are_whole_when_everything_fits() -> None:
    value = {"k" * 150: 1, "short": 2}  # a 158-byte line, but the whole summary fits
    summary = summarize(BLOB_ID, Structured(value))
    assert summary.split("\n")[2:] == ["k" * 150 + ": number", "short: number"]


# -- other JSON values ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("hello", 'json_string | 7 bytes\n── head ──\n"hello"'),
        ("é", 'json_string | 4 bytes\n── head ──\n"é"'),
        (42, "json_number | 2 bytes\n── head ──\n42"),
        (2**70, "json_number | 22 bytes\n── head ──\n1180591620717411303424"),
        (True, "json_boolean | 4 bytes\n── head ──\ntrue"),
        (None, "json_null | 4 bytes\n── head ──\nnull"),
    ],
)
def test_a_scalar_shows_its_type_size_and_value(value: Any, expected: str) -> None:
    assert summarize(BLOB_ID, Structured(value)) == f"{REF} {expected}"


def test_a_long_scalar_is_cut_but_its_header_gives_the_real_size() -> None:
    summary = summarize(BLOB_ID, Structured("x" * 1000))
    header, marker, line = summary.split("\n")
    assert header == f"{REF} json_string | 1002 bytes"
    assert line == '"' + "x" * (400 - size(header) - size(marker) - 2 - 4) + "…"
    assert size(summary) == 400


# -- properties -----------------------------------------------------------------------------


def stretched(strategy: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    """Strings, sometimes repeated into very long lines."""
    return st.one_of(
        strategy,
        st.tuples(strategy, st.integers(min_value=1, max_value=3000)).map(lambda p: p[0] * p[1]),
    )


chars = st.characters(codec=None)  # includes lone surrogates
line_pieces = stretched(st.text(alphabet=chars, max_size=12))
texts = st.lists(line_pieces, max_size=14).flatmap(
    lambda lines: st.sampled_from(["\n", "\r\n"]).map(lambda sep: sep.join(lines))
)
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**80), max_value=2**80),
    st.floats(allow_nan=False, allow_infinity=False),
    stretched(st.text(max_size=8)),
)
json_values = st.recursive(
    scalars,
    lambda children: st.one_of(
        st.lists(children, max_size=6),
        st.dictionaries(stretched(st.text(max_size=6)), children, max_size=6),
    ),
    max_leaves=25,
)


@settings(max_examples=200, deadline=None)
@given(texts)
def test_any_text_summary_follows_the_width_rule(text: str) -> None:
    assert_width_rule(summarize(BLOB_ID, Text(text)), text_parts(text))


@settings(max_examples=200, deadline=None)
@given(st.lists(json_values, max_size=5))
def test_any_array_summary_follows_the_width_rule(items: list[Any]) -> None:
    summary = summarize(BLOB_ID, Structured(items))
    assert summary.split("\n")[0] == f"{REF} json_array | {len(items)} entries"
    assert_width_rule(summary, array_parts(items))


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(stretched(st.text(max_size=6)), json_values, max_size=40))
def test_any_object_summary_fits_and_accounts_for_every_key(value: dict[str, Any]) -> None:
    summary = summarize(BLOB_ID, Structured(value))
    assert size(summary) <= LIMIT
    header, marker, *shown = summary.split("\n")
    assert header == f"{REF} json_object | {len(value)} keys"
    assert marker == "── keys ──"
    real = [f"{display_key(k)}: {shape(v)}" for k, v in value.items()]
    if shown == real:
        return  # everything fits whole
    more = 0
    if shown and shown[-1].startswith("… +"):
        more = int(shown.pop()[len("… +") :].removesuffix(" more keys"))
    assert len(shown) + more == len(value)
    assert shown == [cut(line, 80) for line in real[: len(shown)]]
    if more:  # one more key line (and the smaller count) would not have fit
        rest = "" if more == 1 else f"\n… +{more - 1} more keys"
        assert (
            size(summary)
            - size(f"\n… +{more} more keys")
            + size("\n" + cut(real[len(shown)], 80) + rest)
            > LIMIT
        )


@settings(max_examples=200, deadline=None)
@given(json_values)
def test_any_json_value_gives_a_summary_within_the_limit(value: Any) -> None:
    summary = summarize(BLOB_ID, Structured(value))
    assert size(summary) <= LIMIT
    header = summary.split("\n")[0]
    kind = json_type(value)
    assert header.startswith(f"{REF} json_{kind} | ")
    if kind not in ("array", "object"):
        compact = dumps_compact(value)
        assert header == f"{REF} json_{kind} | {size(compact)} bytes"
        assert_width_rule(summary, [(header, False), ("── head ──", False), (compact, True)])


def test_summaries_are_deterministic() -> None:
    text = "\n".join("é" * n for n in range(0, 2000, 97))
    assert summarize(BLOB_ID, Text(text)) == summarize(BLOB_ID, Text(text))


@settings(max_examples=300)
@given(
    line=st.text(alphabet=st.sampled_from(["a", "é", "€", "😀", "\ud800", " "]), max_size=60),
    limit=st.integers(0, 50),
    width=st.integers(0, 60),
)
def test_the_size_of_a_cut_line_is_the_size_of_the_line_cut(line: str, limit: int, width: int):
    shown = _Shown.of(line, limit)
    assert shown.cut_size(width) == len(shown.cut(width))


def fit_by_search(parts: list[Any], limit: int) -> str:
    """_fit by its definition: the widest common width that fits, by binary search over
    every width (total grows with the width)."""
    fixed = sum(len(encode_text(p)) for p in parts if isinstance(p, str))
    shown = [p for p in parts if isinstance(p, _Shown)]

    def total(width: int) -> int:
        return fixed + len(parts) - 1 + sum(p.cut_size(width) for p in shown)

    width = max((p.size for p in shown), default=0)
    if total(width) > limit:
        low, high = 0, min(width, limit)
        while low < high:
            middle = (low + high + 1) // 2
            low, high = (middle, high) if total(middle) <= limit else (low, middle - 1)
        width = low
    return "\n".join(p if isinstance(p, str) else decode_text(p.cut(width)) for p in parts)


wide_characters = st.sampled_from(["a", "b", " ", "é", "€", "中", "😀"])


@settings(max_examples=2000, deadline=None)
@given(
    st.lists(
        st.text(wide_characters, max_size=30).map(lambda text: ("fixed", text))
        | st.text(wide_characters, max_size=900).map(lambda text: ("shown", text)),
        max_size=14,
    ),
    st.integers(min_value=0, max_value=500),
)
def test_the_common_width_is_the_widest_that_fits(spec: list[tuple[str, str]], limit: int) -> None:
    parts = [text if kind == "fixed" else _Shown.of(text, limit) for kind, text in spec]
    assert _fit(parts, limit) == fit_by_search(parts, limit)
