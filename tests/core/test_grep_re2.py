"""grep: in RE2, streamed in blocks and bounded (docs/selectors.md): per-line results equal to
Python's re for patterns both accept, whatever the block edges; a page of matches with the
header `<n> matches in lines <A>-<B> of <N>` and an exact continuation; a line cap; one-line
errors for patterns RE2 refuses; bounded memory on a 200 MB single-line blob."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

import core.grep
import core.inspect_tool
from core.agent.policy import DEFAULT_POLICY
from core.content import Structured, Text, cut_utf8
from core.grep import LINE_CAP, Page, compile_pattern, search
from core.inspect_tool import InspectError, inspect_blob, render_inspect
from core.lines import split_lines
from core.selectors import GrepView, evaluate
from core.store import FsBlobStore

REPO = Path(__file__).resolve().parents[2]
BLOB_ID = uuid.UUID("0190f5e2-7c1a-7b3e-9c4d-123456789abc")
TRAILER = re.compile(r"^… truncated — continue with (.+)$")
EVERYTHING = Page(max_bytes=1 << 40)

# Texts of lines made of ASCII, 2-, 3- and 4-byte characters, "\r" inside and at the end of
# lines, "\r\n" and "\n" endings, with or without a final newline.
pieces = st.sampled_from(["a", "b", "ab", " ", "\t", "é", "€", "😀", "\r", "\n", "\r\n", "x\n"])
texts = st.lists(pieces, max_size=40).map("".join)


def _pattern_tree(leaf: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    return st.recursive(
        leaf,
        lambda inner: st.one_of(
            st.tuples(inner, inner).map("".join),
            st.tuples(inner, inner).map("|".join),
            inner.map(lambda p: f"({p})"),
            st.tuples(inner, st.sampled_from(["*", "+", "?", "{1,2}"])).map("".join),
        ),
        max_leaves=5,
    )


# A grammar whose meaning Python's re and RE2 share on these texts: no \w \d \b (Unicode in
# Python, ASCII in RE2), no {,n} (a quantifier in Python, literal text in RE2).
atoms = st.sampled_from(
    ["a", "b", "é", "€", "😀", " ", ".", "[ab]", "[^a]", "[é€]", r"\s", r"\t", r"\r", "x"]
)
patterns = st.one_of(
    _pattern_tree(atoms),
    st.tuples(
        st.sampled_from(["", "^", "(?i)"]), _pattern_tree(atoms), st.sampled_from(["", "$"])
    ).map("".join),
    st.sampled_from(["^$", "^", "$", "x*", r"\Aa", r"b\z", r"\s$", "^.$"]),
)


def both_accept(pattern: str) -> bool:
    try:
        re.compile(pattern.replace(r"\z", r"\Z"))
        compile_pattern(pattern)
    except (re.error, core.grep.PatternError):
        return False
    return True


def reference(text: str, pattern: str, first: int = 1, last: int | None = None) -> list:
    """Python's re on each line of the line model (RE2's \\z is Python's \\Z)."""
    compiled = re.compile(pattern.replace(r"\z", r"\Z"))
    lines = split_lines(text)
    last = len(lines) if last is None else last
    return [
        (n, line) for n, line in enumerate(lines, 1) if first <= n <= last and compiled.search(line)
    ]


def cut_into_blocks(data: bytes, cuts: list[int]) -> list[bytes]:
    edges = sorted({0, len(data), *(c % (len(data) + 1) for c in cuts)})
    return [data[a:b] for a, b in zip(edges, edges[1:], strict=False)]


@settings(max_examples=400, deadline=None)
@given(texts, patterns, st.lists(st.integers(min_value=0, max_value=200), max_size=8))
def test_it_matches_what_pythons_re_matches_per_line_whatever_the_block_edges(
    text: str, pattern: str, cuts: list[int]
) -> None:
    assume(both_accept(pattern))
    blocks = cut_into_blocks(text.encode(), cuts)  # edges even inside a character
    found = search(blocks, compile_pattern(pattern), page=EVERYTHING)
    assert found.matches == reference(text, pattern)
    assert found.complete and found.line_count == len(split_lines(text))
    assert (found.first, found.last) == (1, len(split_lines(text)))


@settings(max_examples=200, deadline=None)
@given(texts, patterns, st.integers(min_value=1, max_value=6))
def test_a_string_value_is_searched_in_chunks_with_the_same_result(
    text: str, pattern: str, block: int
) -> None:
    assume(both_accept(pattern))
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(core.grep, "BLOCK", block)  # chunks of a few characters
        view = evaluate("key:log | grep:" + json.dumps(pattern), Structured({"log": text}))
    assert isinstance(view, GrepView)
    assert view.matches == reference(text, pattern)


@settings(max_examples=150, deadline=None)
@given(
    texts, patterns, st.integers(min_value=1, max_value=5), st.integers(min_value=0, max_value=5)
)
def test_a_blob_file_and_the_loaded_text_give_byte_identical_results(
    tmp_path_factory: pytest.TempPathFactory, text: str, pattern: str, start: int, more: int
) -> None:
    assume(both_accept(pattern))
    store = FsBlobStore(tmp_path_factory.mktemp("grep"))
    blob_id = store.store_sync(Text(text))
    for selector in (
        f"grep:{json.dumps(pattern)}",
        f"lines:{start}-{start + more} | grep:{json.dumps(pattern)}",
    ):
        try:
            expected = render_inspect(blob_id, Text(text), selector, DEFAULT_POLICY)
        except Exception as error:  # noqa: BLE001 - the same error either way
            with pytest.raises(InspectError, match=re.escape(str(error))):
                inspect_blob(store, str(blob_id), selector)
            continue
        assert inspect_blob(store, str(blob_id), selector) == expected


# -- the page: header and continuation -------------------------------------------------------


def test_the_header_says_how_many_matches_in_which_lines_of_how_many() -> None:
    text = Text("alpha\nbeta\r\nalphabet\ngamma")
    result = render_inspect(BLOB_ID, text, "grep:^alpha", DEFAULT_POLICY)
    assert (
        result
        == f"[blob:{BLOB_ID}] grep ^alpha: 2 matches in lines 1-4 of 4\n1: alpha\n3: alphabet"
    )
    chained = render_inspect(BLOB_ID, text, "lines:2-3 | grep:a$", DEFAULT_POLICY)
    assert (
        chained
        == f"[blob:{BLOB_ID}] lines:2-3 | grep:a$ → grep a$: 1 matches in lines 2-3 of 4\n2: beta"
    )
    empty = render_inspect(BLOB_ID, Structured({"s": ""}), "key:s | grep:x", DEFAULT_POLICY)
    assert empty == f"[blob:{BLOB_ID}] key:s | grep:x → grep x: 0 matches in an empty text"


def many_matches(count: int = 5000) -> str:
    return "".join(
        f"{'ERROR' if n % 3 == 0 else 'info'} event number {n}\n" for n in range(1, count + 1)
    )


def test_a_page_of_matches_ends_with_the_selector_that_searches_on_after_it(
    store: FsBlobStore,
) -> None:
    text = many_matches()
    blob_id = store.store_sync(Text(text))
    result = inspect_blob(store, str(blob_id), "grep:ERROR")
    header, *body, trailer = result.split("\n")
    match = re.fullmatch(
        rf"\[blob:{BLOB_ID.hex[:0]}.*\] grep ERROR: (\d+) matches in lines 1-(\d+) of 5000", header
    )
    assert match, header
    shown, searched_to = int(match.group(1)), int(match.group(2))
    assert len(body) == shown and len(result.encode()) <= DEFAULT_POLICY.inspect_limit
    assert body == [f"{n}: {line}" for n, line in reference(text, "ERROR", 1, searched_to)]
    # The next line after the last one searched holds the match that did not fit.
    assert (
        int(body[-1].split(":")[0])
        < searched_to + 1
        == reference(text, "ERROR", searched_to + 1)[0][0]
    )
    assert trailer == f"… truncated — continue with lines:{searched_to + 1}- | grep:ERROR"


@pytest.mark.parametrize(
    ("selector", "first", "last"),
    [
        ("grep:ERROR", 1, None),
        ("lines:1000-4321 | grep:ERROR", 1000, 4321),
        ("grep:^info", 1, None),
    ],
)
def test_reading_on_finds_every_match_once_and_in_order(
    store: FsBlobStore, selector: str, first: int, last: int | None
) -> None:
    text = many_matches()
    blob_id = store.store_sync(Text(text))
    pattern = selector.rsplit("grep:", 1)[1]
    seen: list[str] = []
    selectors = [selector]
    while True:
        result = inspect_blob(store, str(blob_id), selectors[-1])
        assert len(result.encode()) <= DEFAULT_POLICY.inspect_limit
        header, *lines = result.split("\n")
        trailer = TRAILER.match(lines[-1]) if lines else None
        if trailer is None:
            seen += lines
            break
        seen += lines[:-1]
        selectors.append(trailer.group(1))
    expected = [f"{n}: {line}" for n, line in reference(text, pattern, first, last)]
    assert seen == expected
    assert len(selectors) > 3
    if last is not None:
        assert all(s.endswith(f"-{last} | grep:{pattern}") for s in selectors[1:])


def test_the_line_count_comes_from_the_index_when_the_search_stops_early(
    store: FsBlobStore,
) -> None:
    blob_id = store.store_sync(Text(many_matches()))
    header = inspect_blob(store, str(blob_id), "grep:ERROR").split("\n")[0]
    assert header.endswith(" of 5000")


def test_without_an_index_a_search_that_stops_early_does_not_know_the_line_count(
    store: FsBlobStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    # When no index can be had, the header says `of ?` rather than reading the rest of the
    # blob only to count its lines; a search that reaches the end counts them on the way.
    blob_id = store.store_sync(Text(many_matches()))
    monkeypatch.setattr(core.inspect_tool, "open_index", lambda *args, **kwargs: None)
    header = inspect_blob(store, str(blob_id), "grep:ERROR").split("\n")[0]
    assert header.endswith(" of ?")
    assert (
        inspect_blob(store, str(blob_id), "lines:4990- | grep:ERROR")
        .split("\n")[0]
        .endswith("grep ERROR: 3 matches in lines 4990-5000 of 5000")
    )
    assert (
        inspect_blob(store, str(blob_id), "grep:^info event number 4999$")
        .split("\n")[0]
        .endswith("grep ^info event number 4999$: 1 matches in lines 1-5000 of 5000")
    )


# -- the line cap ----------------------------------------------------------------------------


def test_a_line_longer_than_the_cap_is_matched_on_its_first_part_and_the_result_says_so(
    store: FsBlobStore,
) -> None:
    long_line = "é" + "x" * LINE_CAP + "NEEDLE"  # the needle lies past the cap
    blob_id = store.store_sync(Text(f"NEEDLE\n{long_line}\nNEEDLE at the end\n"))
    result = inspect_blob(store, str(blob_id), "grep:NEEDLE")
    assert result.split("\n") == [
        f"[blob:{blob_id}] grep NEEDLE: 2 matches in lines 1-3 of 3",
        f"… line 2 is longer than {LINE_CAP} bytes: only the first {LINE_CAP} bytes of each "
        "were searched",
        "1: NEEDLE",
        "3: NEEDLE at the end",
    ]
    # Within the cap it matches, and is shown cut with its size.
    hit = inspect_blob(store, str(blob_id), "grep:^éx")
    assert f"… this match is {len(b'2: ') + len(long_line.encode())} bytes" in hit


@settings(max_examples=200, deadline=None)
@given(texts, patterns, st.lists(st.integers(min_value=0, max_value=200), max_size=8))
def test_with_a_small_cap_each_line_is_matched_on_its_capped_start(
    text: str, pattern: str, cuts: list[int]
) -> None:
    assume(both_accept(pattern))
    if r"\z" in pattern or "$" in pattern:
        return  # the end of a cut line is not the end of the line
    lines = split_lines(text)
    capped = [
        cut_utf8(line.encode(), 5).decode() if len(line.encode()) > 5 else line for line in lines
    ]
    compiled = re.compile(pattern.replace(r"\z", r"\Z"))
    expected = [(n, line) for n, line in enumerate(capped, 1) if compiled.search(line)]
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(core.grep, "LINE_CAP", 5)
        blocks = cut_into_blocks(text.encode(), cuts)
        found = search(blocks, compile_pattern(pattern), page=EVERYTHING)
    assert found.matches == expected
    assert found.long_lines == [n for n, line in enumerate(lines, 1) if len(line.encode()) > 5]


# -- patterns RE2 refuses --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("pattern", "message"),
    [
        (r"(a)\1", r"grep: invalid regex '(a)\\1': invalid escape sequence: \1"),
        ("(?=a)", "grep: invalid regex '(?=a)': invalid perl operator: (?="),
        ("(", "grep: invalid regex '(': missing ): ("),
    ],
)
def test_an_invalid_pattern_is_a_one_line_error(
    store: FsBlobStore, pattern: str, message: str
) -> None:
    blob_id = store.store_sync(Text("a\n"))
    with pytest.raises(InspectError) as raised:
        inspect_blob(store, str(blob_id), f"grep:{pattern}")
    assert str(raised.value).startswith(message)
    assert "\n" not in str(raised.value)


def test_a_lone_surrogate_in_a_pattern_matches_the_same_character_in_a_blob(
    store: FsBlobStore,
) -> None:
    blob_id = store.store_sync(Text("a\ud800b\nab\n"))
    assert inspect_blob(store, str(blob_id), 'grep:"\\ud800"').split("\n")[1:] == ["1: a\ud800b"]


# -- bounded memory --------------------------------------------------------------------------

MEMORY_SCRIPT = textwrap.dedent(
    """
    import sys, uuid
    from pathlib import Path
    sys.path.insert(0, sys.argv[1])
    from core.store import FsBlobStore
    from core.inspect_tool import inspect_blob

    def kib(field):
        for line in open("/proc/self/status"):
            if line.startswith(field):
                return int(line.split()[1])

    root = Path(sys.argv[2])
    blob_id = uuid.uuid4()
    with open(root / f"{blob_id}.txt", "wb") as file:  # 200 MB in one line, streamed
        chunk = b"abcdefghij" * 100_000
        for _ in range(200):
            file.write(chunk)
        file.write(b"NEEDLE\\n")
    start = kib("VmRSS:")
    with open("/proc/self/clear_refs", "w") as refs:
        refs.write("5")  # the peak (VmHWM) starts again from here
    result = inspect_blob(FsBlobStore(root), str(blob_id), "grep:abc")
    print(start, kib("VmHWM:"), result.split("\\n")[0])
    """
)


def test_grep_on_a_200_mb_single_line_blob_stays_under_64_mb_above_the_start(
    tmp_path: Path,
) -> None:
    run = subprocess.run(
        [sys.executable, "-c", MEMORY_SCRIPT, str(REPO), str(tmp_path)],
        capture_output=True,
        text=True,
        check=True,
    )
    start, peak, header = run.stdout.split(" ", 2)
    growth_mb = (int(peak) - int(start)) / 1024
    assert growth_mb < 64, f"peak {growth_mb:.1f} MB above the start"
    assert header.strip().endswith("grep abc: 1 matches in lines 1-1 of 1")
