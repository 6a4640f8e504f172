"""The inspect tool (docs/selectors.md): a header line, the selected content, an 8,000-byte cap
whose trailer names the selector that reads on, and one-line InspectErrors for every bad input."""

from __future__ import annotations

import asyncio
import json
import re
import uuid
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core.agent.policy import DEFAULT_POLICY, Policy
from core.content import Structured, Text
from core.inspect_tool import (
    INSPECT_DESCRIPTION,
    INSPECT_NAME,
    INSPECT_PARAMETERS,
    InspectError,
    inspect_blob,
    inspect_blob_async,
    render_inspect,
)
from core.selectors import SelectorError
from core.store import FsBlobStore

BLOB_ID = uuid.UUID("0190f5e2-7c1a-7b3e-9c4d-123456789abc")
REF = f"[blob:{BLOB_ID}]"
CAP = 8000
TRAILER = re.compile(r"^… truncated — continue with (.+)$")


def size(text: str) -> int:
    return len(text.encode("utf-8", "surrogatepass"))


def render(content: Text | Structured, selector: str | None = None) -> str:
    return render_inspect(BLOB_ID, content, selector, DEFAULT_POLICY)


def numbered_text(count: int, width: int = 0) -> Text:
    return Text("".join(f"line {n}{'x' * width}\n" for n in range(1, count + 1)))


def read_on(
    store: FsBlobStore, blob_id: uuid.UUID, selector: str
) -> tuple[list[str], list[str], list[str]]:
    """Follow every `continue with` to the end: (body lines, headers, selectors used)."""
    body: list[str] = []
    headers: list[str] = []
    selectors = [selector]
    while True:
        result = inspect_blob(store, str(blob_id), selectors[-1])
        assert size(result) <= CAP
        header, *lines = result.split("\n")
        headers.append(header)
        trailer = TRAILER.match(lines[-1]) if lines else None
        if trailer is None:
            return body + lines, headers, selectors
        body += lines[:-1]
        selectors.append(trailer.group(1))
        assert len(selectors) < 1000


# -- the tool's declaration -----------------------------------------------------------------


def test_it_is_named_inspect_and_takes_a_blob_id_and_an_optional_selector() -> None:
    assert INSPECT_NAME == "inspect"
    assert INSPECT_PARAMETERS["required"] == ["blob_id"]
    assert INSPECT_PARAMETERS["properties"]["blob_id"]["type"] == "string"
    assert INSPECT_PARAMETERS["properties"]["selector"]["type"] == "string"


def test_its_description_teaches_every_selector_form() -> None:
    for form in ("lines:20-50", "lines:20-", "slice:3..8", "3..=8", "key:results", 'key:"a|b"'):
        assert form in INSPECT_DESCRIPTION
    assert "grep:" in INSPECT_DESCRIPTION
    assert "|" in INSPECT_DESCRIPTION
    assert "continue with" in INSPECT_DESCRIPTION


# -- without a selector ---------------------------------------------------------------------


def test_a_short_text_shows_kind_size_count_and_all_lines() -> None:
    assert render(Text("a\r\nb\n")) == f"{REF} text | 2 lines | 5 bytes\na\nb"


def test_a_long_text_shows_its_first_40_lines_and_where_to_go_on() -> None:
    result = render(numbered_text(100))
    lines = result.split("\n")
    assert lines[0] == f"{REF} text | 100 lines | {size(numbered_text(100).text)} bytes"
    assert lines[1:41] == [f"line {n}" for n in range(1, 41)]
    assert lines[41:] == ["… 60 more lines — continue with lines:41-80"]


def test_an_array_shows_its_schema_and_first_entries() -> None:
    items = [{"id": n, "ok": n % 2 == 0} for n in range(3)]
    assert render(Structured(items)) == (
        f"{REF} json_array | 3 entries | {len(json.dumps(items, separators=(',', ':')))} bytes\n"
        "── schema ──\n"
        "id: number, ok: boolean\n"
        "(key:id gives that key of every entry)\n"
        "── head ──\n"
        '{"id":0,"ok":true}\n'
        '{"id":1,"ok":false}\n'
        '{"id":2,"ok":true}'
    )


def test_a_long_array_shows_40_entries_and_where_to_go_on() -> None:
    lines = render(Structured(list(range(100)))).split("\n")
    stored = len(json.dumps(list(range(100)), separators=(",", ":")))
    assert lines[0] == f"{REF} json_array | 100 entries | {stored} bytes"
    assert lines[1:4] == ["── schema ──", "number", "── head ──"]
    assert lines[4:44] == [str(n) for n in range(40)]
    assert lines[44:] == ["… 60 more entries — continue with slice:40..80"]


def test_an_empty_array_has_an_empty_schema() -> None:
    assert (
        render(Structured([])) == f"{REF} json_array | 0 entries | 2 bytes\n── schema ──\n(empty)"
    )


def test_an_object_shows_its_key_lines() -> None:
    value = {"results": [1, 2], "log": "a\nb", "meta": {}, "n": 1.5, "ok": None}
    assert render(Structured(value)) == (
        f"{REF} json_object | 5 keys | {size(json.dumps(value, separators=(',', ':')))} bytes\n"
        "── keys ──\n"
        "results: array[2]\n"
        "log: string(3)\n"
        "meta: object{0}\n"
        "n: number\n"
        "ok: null"
    )


def test_a_scalar_shows_its_value() -> None:
    assert render(Structured("hé")) == f'{REF} json_string | 5 bytes\n"hé"'


# -- with a selector ------------------------------------------------------------------------


def test_lines_gives_a_header_with_the_range_and_the_raw_lines() -> None:
    assert render(numbered_text(100), "lines:3-5") == (
        f"{REF} lines 3-5 of 100\nline 3\nline 4\nline 5"
    )


def test_lines_header_shows_the_clamped_end() -> None:
    assert (
        render(numbered_text(100), "lines:99-500")
        == f"{REF} lines 99-100 of 100\nline 99\nline 100"
    )
    assert render(numbered_text(100), "lines:100-") == f"{REF} lines 100-100 of 100\nline 100"


def test_slice_gives_one_compact_element_per_line() -> None:
    items = [{"id": n, "tags": ["a", "b"]} for n in range(10)]
    assert render(Structured(items), "slice:2..4") == (
        f'{REF} slice 2..4 of 10 entries\n{{"id":2,"tags":["a","b"]}}\n{{"id":3,"tags":["a","b"]}}'
    )


def test_slice_header_shows_the_clamped_range() -> None:
    result = render(Structured(list(range(10))), "slice:8..=20")
    assert result == f"{REF} slice 8..10 of 10 entries\n8\n9"


def test_an_empty_slice_has_just_its_header() -> None:
    assert render(Structured([1, 2]), "slice:5..") == f"{REF} slice 2..2 of 2 entries"


def test_key_gives_the_shape_and_a_string_as_raw_text() -> None:
    content = Structured({"log": "first\nsecond\r\nthird\n"})
    assert render(content, "key:log") == f"{REF} key log: string(20)\nfirst\nsecond\nthird"


def test_key_gives_other_values_as_indented_json() -> None:
    content = Structured({"meta": {"a": [1, 2], "b": None}, "n": 3})
    assert render(content, "key:meta") == (
        f'{REF} key meta: object{{2}}\n{{\n  "a": [\n    1,\n    2\n  ],\n  "b": null\n}}'
    )
    assert render(content, "key:n") == f"{REF} key n: number\n3"


def test_key_header_quotes_a_key_that_needs_it() -> None:
    content = Structured({" padded ": 1, "a|b": 2})
    assert render(content, 'key:" padded "') == f'{REF} key " padded ": number\n1'
    assert render(content, 'key:"a|b"') == f"{REF} key a|b: number\n2"


def test_grep_gives_numbered_matches() -> None:
    result = render(Text("alpha\nbeta\nalphabet\n"), "grep:^alpha")
    assert result == f"{REF} grep ^alpha: 2 matches in lines 1-3 of 3\n1: alpha\n3: alphabet"


def test_a_chained_selector_is_named_whole_in_the_header() -> None:
    content = Structured({"log": "a\nERROR b\nc\nERROR d", "results": [1, 2, 3]})
    assert render(content, "key:log|grep:ERROR") == (
        f"{REF} key:log | grep:ERROR → grep ERROR: 2 matches in lines 1-4 of 4\n"
        "2: ERROR b\n4: ERROR d"
    )
    assert render(content, "key:results | slice:1..") == (
        f"{REF} key:results | slice:1.. → slice 1..3 of 3 entries\n2\n3"
    )
    assert render(content, "key:log | lines:2-3") == (
        f"{REF} key:log | lines:2-3 → lines 2-3 of 4\nERROR b\nc"
    )


# -- the 8,000-byte cap ---------------------------------------------------------------------


def test_a_capped_result_stops_at_a_whole_line_and_names_the_next_selector() -> None:
    result = render(numbered_text(3000, width=40), "lines:1-")
    assert size(result) <= CAP
    *shown, trailer = result.split("\n")[1:]
    last = int(shown[-1].split()[1].rstrip("x"))
    assert trailer == f"… truncated — continue with lines:{last + 1}-"
    assert shown == [f"line {n}{'x' * 40}" for n in range(1, last + 1)]
    # The next line would not have fitted with the trailer.
    assert size(result) - size(trailer) + size(f"line {last + 1}{'x' * 40}\n") > CAP - size(
        f"\n… truncated — continue with lines:{last + 2}-"
    )


@pytest.mark.parametrize(
    ("selector", "expected"),
    [
        ("lines:1-", [f"line {n}{'x' * 40}" for n in range(1, 3001)]),
        ("lines:7-2500", [f"line {n}{'x' * 40}" for n in range(7, 2501)]),
        ("lines:2990-5000", [f"line {n}{'x' * 40}" for n in range(2990, 3001)]),
        (
            r"grep:7\d?x",
            [
                f"{n}: line {n}{'x' * 40}"
                for n in range(1, 3001)
                if re.search(r"7\d?x", f"line {n}x")
            ],
        ),
        (
            r"lines:100-2000 | grep:5",
            [f"{n}: line {n}{'x' * 40}" for n in range(100, 2001) if "5" in str(n)],
        ),
    ],
)
def test_reading_on_reads_every_line_exactly_once(
    store: FsBlobStore, selector: str, expected: list[str]
) -> None:
    blob_id = store.store_sync(numbered_text(3000, width=40))
    body, headers, selectors = read_on(store, blob_id, selector)
    assert body == expected
    assert len(selectors) > 1 or len(expected) < 150


def test_reading_on_through_an_array_reads_every_entry_once(store: FsBlobStore) -> None:
    items = [{"id": n, "text": "é" * 30} for n in range(1000)]
    blob_id = store.store_sync(Structured(items))
    body, _, selectors = read_on(store, blob_id, "slice:0..")
    assert [json.loads(line) for line in body] == items
    assert len(selectors) > 5
    body, _, _ = read_on(store, blob_id, "slice:10..=500")
    assert [json.loads(line) for line in body] == items[10:501]


def test_reading_on_through_a_string_value_reads_every_line_once(store: FsBlobStore) -> None:
    log = "\n".join(f"log line {n} " + "€" * 20 for n in range(2000))
    blob_id = store.store_sync(Structured({"log": log}))
    body, headers, _ = read_on(store, blob_id, "key:log")
    assert body == log.split("\n")
    assert headers[1].startswith(f"[blob:{blob_id}] key:log | lines:")


def test_reading_on_from_indented_json_resumes_at_the_next_entry(store: FsBlobStore) -> None:
    items = [{"id": n, "name": f"item {n}"} for n in range(500)]
    blob_id = store.store_sync(Structured({"results": items}))
    first = inspect_blob(store, str(blob_id), "key:results")
    assert size(first) <= CAP
    trailer = TRAILER.match(first.split("\n")[-1])
    assert trailer is not None
    next_selector = trailer.group(1)
    start = int(re.fullmatch(r"key:results \| slice:(\d+)\.\.", next_selector).group(1))
    shown = json.loads("\n".join(first.split("\n")[1:-1]).rstrip(",") + "]")
    assert shown == items[:start]
    rest, _, _ = read_on(store, blob_id, next_selector)
    assert [json.loads(line) for line in rest] == items[start:]


def test_reading_on_from_the_overview_of_a_text(store: FsBlobStore) -> None:
    blob_id = store.store_sync(numbered_text(100, width=300))
    first = inspect_blob(store, str(blob_id))
    assert size(first) <= CAP
    *shown, trailer = first.split("\n")[1:]
    assert trailer == f"… truncated — continue with lines:{len(shown) + 1}-40"
    rest, _, _ = read_on(store, blob_id, f"lines:{len(shown) + 1}-40")
    assert shown + rest == [f"line {n}{'x' * 300}" for n in range(1, 41)]


def test_a_line_longer_than_the_cap_is_cut_on_a_character_boundary() -> None:
    long_line = "€" * 5000 + "\U0001f600" * 10  # 15,040 bytes
    result = render(Text(f"{long_line}\nshort\nlast"), "lines:1-3")
    assert size(result) <= CAP
    header, cut, note, trailer = result.split("\n")
    assert header == f"{REF} lines 1-3 of 3"
    assert cut.endswith("…")
    assert long_line.startswith(cut[:-1])
    assert size(result) > CAP - 4  # it uses the room there is, up to a 3-byte character
    assert note == "… this line is 15040 bytes; only its start is shown"
    assert trailer == "… truncated — continue with lines:2-3"


def test_a_long_last_line_is_cut_without_a_trailer() -> None:
    result = render(Text("short\n" + "\U0001f600" * 3000), "lines:2")
    header, cut, note = result.split("\n")
    assert header == f"{REF} lines 2-2 of 2"
    assert size(cut) <= CAP and cut.endswith("…") and ("\U0001f600" * 3000).startswith(cut[:-1])
    assert note == "… this line is 12000 bytes; only its start is shown"


def test_a_long_array_entry_is_cut_with_a_note() -> None:
    result = render(Structured(["x" * 20_000, "next"]), "slice:0..")
    lines = result.split("\n")
    assert size(result) <= CAP
    assert lines[2] == "… this entry is 20002 bytes; only its start is shown"
    assert lines[3] == "… truncated — continue with slice:1.."


def test_a_policy_sets_the_cap_and_the_overview_length() -> None:
    policy = Policy(inspect_limit=200, inspect_head_lines=3)
    result = render_inspect(BLOB_ID, numbered_text(10), None, policy)
    assert result.split("\n")[1:] == [
        "line 1",
        "line 2",
        "line 3",
        "… 7 more lines — continue with lines:4-6",
    ]
    result = render_inspect(BLOB_ID, numbered_text(100), "lines:1-", policy)
    assert size(result) <= 200
    *shown, trailer = result.split("\n")[1:]
    assert shown == [f"line {n}" for n in range(1, len(shown) + 1)]
    assert trailer == f"… truncated — continue with lines:{len(shown) + 1}-"


# -- through the store, and errors ----------------------------------------------------------


def test_inspect_blob_reads_from_the_store(store: FsBlobStore) -> None:
    blob_id = store.store_sync(numbered_text(10))
    assert (
        inspect_blob(store, str(blob_id), "lines:2") == f"[blob:{blob_id}] lines 2-2 of 10\nline 2"
    )
    assert inspect_blob(store, str(blob_id).upper(), None).startswith(f"[blob:{blob_id}] text")


def test_the_async_tool_gives_the_same_result(store: FsBlobStore) -> None:
    blob_id = store.store_sync(Structured({"results": list(range(100))}))
    for selector in (None, "key:results", "key:results | slice:5..=7"):
        expected = inspect_blob(store, str(blob_id), selector)
        assert asyncio.run(inspect_blob_async(store, str(blob_id), selector)) == expected


def inspect_error(store: FsBlobStore, blob_id: str, selector: str | None = None) -> str:
    with pytest.raises(InspectError) as raised:
        inspect_blob(store, blob_id, selector)
    message = str(raised.value)
    assert message and "\n" not in message
    with pytest.raises(InspectError) as raised_async:
        asyncio.run(inspect_blob_async(store, blob_id, selector))
    assert str(raised_async.value) == message
    return message


@pytest.mark.parametrize("bad", ["../etc/passwd", "", "not-a-uuid", "0190f5e2-7c1a-7b3e-9c4d"])
def test_a_malformed_id_is_a_one_line_error(store: FsBlobStore, bad: str) -> None:
    assert "expected a UUID" in inspect_error(store, bad)


def test_an_unknown_id_is_a_one_line_error(store: FsBlobStore) -> None:
    missing = str(uuid.uuid4())
    assert inspect_error(store, missing) == f"blob {missing} not found"


def test_a_damaged_blob_is_a_one_line_error(store: FsBlobStore) -> None:
    blob_id = store.store_sync(Structured([1]))
    (store.root / f"{blob_id}.json").write_bytes(b"[1,\n2")
    assert "damaged JSON" in inspect_error(store, str(blob_id))


@pytest.mark.parametrize(
    ("selector", "message"),
    [
        ("lines:0", "lines: line numbers start at 1"),
        ("bogus", "expected lines:A-B, slice:A..B, key:name, keys:A..B or grep:regex; got 'bogus'"),
        ("grep:(", "grep: invalid regex '('"),
        ("slice:0..10", "slice: applies to a JSON array; this blob is text — try lines:1-40"),
        ("lines:11", "lines:11: line 11 is past the end; the text has 10 lines"),
    ],
)
def test_a_bad_selector_is_a_one_line_error(
    store: FsBlobStore, selector: str, message: str
) -> None:
    blob_id = store.store_sync(numbered_text(10))
    assert message in inspect_error(store, str(blob_id), selector)


def test_a_misapplied_selector_on_an_array_suggests_slice(store: FsBlobStore) -> None:
    blob_id = store.store_sync(Structured(list(range(50))))
    assert inspect_error(store, str(blob_id), "lines:1-10") == (
        "lines: applies to text; this blob is json_array — try slice:0..10"
    )


def test_a_bad_selector_is_reported_before_the_blob_is_read(store: FsBlobStore) -> None:
    # The id does not exist, but the selector is checked first.
    assert "expected lines:A-B" in inspect_error(store, str(uuid.uuid4()), "nonsense")


# -- properties -----------------------------------------------------------------------------


def stretched(strategy: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    return st.one_of(
        strategy,
        st.tuples(strategy, st.integers(min_value=1, max_value=6000)).map(lambda p: p[0] * p[1]),
    )


line_texts = st.lists(
    stretched(st.text(alphabet=st.characters(codec=None), max_size=10)), max_size=60
)
texts = line_texts.map("\n".join).map(Text)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | stretched(st.text(max_size=8)),
    lambda children: (
        st.lists(children, max_size=50)
        | st.dictionaries(stretched(st.text(max_size=5)), children, max_size=30)
    ),
    max_leaves=60,
).map(Structured)
selectors = st.one_of(
    st.none(),
    st.sampled_from(
        [
            "lines:1-",
            "lines:1",
            "lines:2-40",
            "grep:.",
            "grep:a",
            "slice:0..",
            "slice:1..=3",
            "key:a",
        ]
    ),
    st.builds(
        lambda step, n, m: f"{step}{n}{m}",
        st.sampled_from(["lines:", "slice:", "lines:1-20 | lines:"]),
        st.integers(min_value=0, max_value=50).map(str),
        st.sampled_from(["", "-", "-30", "..", "..9", "..=9"]),
    ),
    st.builds(
        lambda key, rest: f"key:{json.dumps(key)}{rest}",
        st.text(max_size=5),
        st.sampled_from(["", " | lines:1-", " | slice:0..", " | grep:."]),
    ),
)


@settings(max_examples=300, deadline=None)
@given(st.one_of(texts, json_values), selectors)
def test_results_never_exceed_the_cap(content: Text | Structured, selector: str | None) -> None:
    try:
        result = render(content, selector)
    except SelectorError as error:
        assert "\n" not in str(error)
        return
    assert size(result) <= CAP
    assert result.startswith(f"{REF} ")


@settings(max_examples=200, deadline=None)
@given(st.one_of(texts, json_values), selectors, st.integers(min_value=150, max_value=2000))
def test_results_never_exceed_a_smaller_cap(
    content: Text | Structured, selector: str | None, limit: int
) -> None:
    try:
        result = render_inspect(BLOB_ID, content, selector, Policy(inspect_limit=limit))
    except SelectorError:
        return
    assert size(result) <= limit


def test_pathologically_long_keys_and_patterns_still_respect_the_cap() -> None:
    key = "k" * 10_000
    cases: list[tuple[Any, str | None]] = [
        (Structured({key: "v", "b": 1}), None),
        (Structured({key: "v"}), f"key:{key}"),
        (Structured({key: ["v"] * 5000}), f"key:{key}"),
        (Text("a\n" * 100), "grep:" + "a?" * 5000),
    ]
    for content, selector in cases:
        assert size(render(content, selector)) <= CAP


# -- lines: of a text blob is read from the file, not loaded whole ----------------------------


def test_lines_of_a_text_blob_does_not_load_the_blob(
    store: FsBlobStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    blob_id = store.store_sync(numbered_text(5000))

    def refuse(*_: object) -> None:
        raise AssertionError("the whole blob was loaded")

    monkeypatch.setattr(FsBlobStore, "load_sync", refuse)
    monkeypatch.setattr(FsBlobStore, "load", refuse)
    expected = f"[blob:{blob_id}] lines 4998-5000 of 5000\nline 4998\nline 4999\nline 5000"
    assert inspect_blob(store, str(blob_id), "lines:4998-9999") == expected
    assert asyncio.run(inspect_blob_async(store, str(blob_id), "lines:4998-")) == expected
    assert inspect_error(store, str(blob_id), "lines:5001") == (
        "lines:5001: line 5001 is past the end; the text has 5000 lines"
    )


def test_lines_of_a_text_blob_that_is_not_utf8_is_an_error(store: FsBlobStore) -> None:
    blob_id = store.store_sync(Text("ok\n"))
    (store.root / f"{blob_id}.txt").write_bytes(b"ok\ncaf\xe9\n")
    assert "not UTF-8" in inspect_error(store, str(blob_id), "lines:2")


stored_texts = st.lists(
    st.one_of(
        st.sampled_from(["", "a", "é€", "\U0001f600", "x\r", "\ud800", " \t"]),
        st.tuples(st.sampled_from(["a", "€", "\U0001f600"]), st.integers(1, 5000)).map(
            lambda p: p[0] * p[1]
        ),
    ),
    max_size=40,
).flatmap(lambda lines: st.sampled_from(["\n", "\r\n"]).map(lambda sep: sep.join(lines)))


@settings(max_examples=200, deadline=None)
@given(
    stored_texts,
    st.integers(min_value=1, max_value=45),
    st.sampled_from(["", "-", "-3", "-20", "-99"]),
    st.sampled_from([150, 400, 2000, 8000]),
    st.booleans(),
)
def test_lines_read_from_the_file_match_the_rendering_of_the_loaded_text(
    tmp_path_factory: pytest.TempPathFactory,
    text: str,
    start: int,
    end: str,
    limit: int,
    final_newline: bool,
) -> None:
    text += "\n" if final_newline and text else ""
    store = FsBlobStore(tmp_path_factory.mktemp("blobs"))
    blob_id = store.store_sync(Text(text))
    policy = Policy(inspect_limit=limit)
    selector = f"lines:{start}{end}"
    if end and int(end[1:] or 10**9) < start:
        return  # a malformed range: the parser refuses it before either path runs
    try:
        expected = render_inspect(blob_id, Text(text), selector, policy)
    except SelectorError as error:
        with pytest.raises(InspectError, match=re.escape(str(error))):
            inspect_blob(store, str(blob_id), selector, policy)
        return
    assert inspect_blob(store, str(blob_id), selector, policy) == expected


def test_a_malformed_selector_also_says_which_selectors_fit_the_blob(store: FsBlobStore) -> None:
    blob_id = store.store_sync(Structured([{"a": 1}] * 5))
    message = inspect_error(store, str(blob_id), "lines:ten-20")
    assert message.startswith("lines: expects A-B, A or A-")
    assert message.endswith(
        "(this blob is json_array — try slice:0..10, or key:a for that key of every entry)"
    )
    assert "\n" not in message
