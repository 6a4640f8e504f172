"""Code and diffs coloured by Pygments: chosen by the file type the making call names or by
a diff's own content. Pygments only splits lines into tokens; the template escapes every
piece, so hostile content stays text and nothing is marked safe; the page stays plain where
colouring cannot be exact."""

from __future__ import annotations

import html as html_lib
import re
import uuid
from pathlib import Path

import pytest
from django.urls import reverse

from blobviewer.ingest.sessions import ingest_session
from blobviewer.models import Blob
from blobviewer.reader.blob_page import making_call
from blobviewer.reader.colour import (
    coloured_lines,
    diff_lexer,
    file_named_by,
    lexer_for_file,
    looks_like_diff,
)
from core.content import Text
from web.records import header, tool_result_item

pytestmark = pytest.mark.django_db

HOSTILE_PY = """BANNER = "<script>alert(1)</script>"
TRAP = '"><img src=x onerror="alert(2)">'
def f():  # </pre><script>alert(3)</script>
    return BANNER
"""
HOSTILE_HTML = """<!doctype html>
<script>alert(1)</script>
<a href="javascript:alert(2)" onclick="alert(3)">x</a>
<img src=x onerror="alert(4)">
"""
DIFF = """diff --git a/app.py b/app.py
--- a/app.py
+++ b/app.py
@@ -1,2 +1,2 @@
-old = "<b>"
+new = "<i>"
 same
"""


def made_by(store, text: str, tool: str, arguments: object, *, seq: int = 2) -> uuid.UUID:
    """A text blob that a call of *tool* with *arguments* made, recorded in a session."""
    blob_id = store.store_sync(Text(text))
    call = {"id": "c1", "name": tool, "arguments": arguments}
    records = [
        {
            "type": "assistant",
            "seq": seq - 1,
            "at": "2025-05-01T12:00:01+00:00",
            "text": "",
            "tool_calls": [call],
        },
        tool_result_item(
            seq, f"[blob:{blob_id}] text | {text.count(chr(10))} lines", tool=tool, call_id="c1"
        ),
    ]
    ingest_session(header(uuid.uuid4()), records, source_path="t", store=store)
    return blob_id


def page(client, blob_id, selector=None) -> str:
    query = {"selector": selector} if selector else {}
    response = client.get(reverse("blob_detail", args=[blob_id]), query)
    assert response.status_code == 200
    return response.content.decode()


def code(html: str) -> str:
    found = re.search(r'<pre class="content lines[^"]*"[^>]*>(.*?)</pre>', html, re.S)
    assert found, "no lines on the page"
    return found.group(1)


def test_a_file_read_by_path_is_coloured_by_its_type(logged_in_client, store):
    blob_id = made_by(
        store,
        "import os\n\ndef f(x):\n    return 1  # one\n",
        "Read",
        {"file_path": "/repo/src/app.py"},
    )

    html = page(logged_in_client, blob_id)

    assert "coloured as Python" in html
    assert '<pre class="content lines d1 code"' in html
    assert '<span class="pg-kn">import</span>' in code(html)
    assert '<span class="pg-c1"># one</span>' in code(html)
    assert " style=" not in code(html)


@pytest.mark.parametrize(
    ("command", "language"),
    [
        ("cat config.toml", "TOML"),
        ("sed -n 1,80p src/main.rs", "Rust"),
        ("bash -lc 'head -n 50 web/index.html'", "HTML"),
    ],
)
def test_a_file_printed_by_a_shell_command_is_coloured(logged_in_client, store, command, language):
    blob_id = made_by(store, "x = 1\n", "bash", {"command": command})

    assert f"coloured as {language}" in page(logged_in_client, blob_id)


@pytest.mark.parametrize(
    ("tool", "arguments"),
    [
        ("bash", {"command": "pytest -x"}),
        ("bash", {"command": "cat a.py | grep x"}),  # a pipeline prints something else
        ("Read", {"file_path": "notes.txt"}),
        ("run_build", {}),
    ],
)
def test_other_outputs_stay_plain(logged_in_client, store, tool, arguments):
    blob_id = made_by(store, "def f(): pass\n", tool, arguments)

    html = page(logged_in_client, blob_id)

    assert "coloured as" not in html and "pg-" not in code(html)


def test_a_unified_diff_is_coloured_by_its_content(logged_in_client, text_blob):
    blob_id = text_blob(DIFF)

    html = page(logged_in_client, blob_id)

    assert "coloured as Diff" in html
    assert '<span class="pg-gd">-old = &quot;&lt;b&gt;&quot;</span>' in code(html)
    assert '<span class="pg-gi">' in code(html)


def test_the_making_call_is_the_first_result_that_begins_with_the_blob(store):
    blob_id = store.store_sync(Text("fn main() {}\n"))
    ref = f"[blob:{blob_id}]"
    records = [
        # An inspect result that begins with the reference does not make the blob.
        {
            "type": "assistant",
            "seq": 1,
            "text": "",
            "tool_calls": [{"id": "i", "name": "inspect", "arguments": {"blob_id": str(blob_id)}}],
        },
        tool_result_item(2, f"{ref} lines 1-1 of 1\nfn main() {{}}", tool="inspect", call_id="i"),
        # A result that only mentions it refers to it.
        {
            "type": "assistant",
            "seq": 3,
            "text": "",
            "tool_calls": [{"id": "m", "name": "note", "arguments": {"path": "x.py"}}],
        },
        tool_result_item(4, f"see {ref}", tool="note", call_id="m"),
        {
            "type": "assistant",
            "seq": 5,
            "text": "",
            "tool_calls": [{"id": "r", "name": "Read", "arguments": {"file_path": "main.rs"}}],
        },
        tool_result_item(6, f"{ref} text | 1 lines", tool="Read", call_id="r"),
    ]
    ingest_session(header(uuid.uuid4()), records, source_path="t", store=store)

    assert making_call(Blob.objects.get(id=blob_id)) == ("Read", {"file_path": "main.rs"})


def test_a_blob_no_session_made_has_no_making_call(store, db):
    assert making_call(Blob(id=store.store_sync(Text("x\n")))) is None


@pytest.mark.parametrize(("name", "text"), [("evil.py", HOSTILE_PY), ("evil.html", HOSTILE_HTML)])
def test_hostile_code_stays_text_when_coloured(logged_in_client, store, name, text):
    blob_id = made_by(store, text, "Read", {"file_path": name})

    html = page(logged_in_client, blob_id)

    coloured = code(html)
    assert "coloured as" in html and "pg-" in coloured
    assert "<script" not in coloured and "<img" not in coloured
    # Its text is the file's, shown as text: every line is there once the markup is gone.
    shown = html_lib.unescape(re.sub(r"<[^>]+>", "", coloured))
    for number, line in enumerate(text.splitlines(), start=1):
        assert f"{number}{line}\n" in shown
    assert " style=" not in coloured
    # Nothing but Pygments' spans, our rows and line numbers, and the cut notes.
    tags = set(re.findall(r"<(/?[a-z]+)", coloured))
    assert tags <= {"span", "/span", "a", "/a"}
    assert all(a.startswith('<a class="ln"') for a in re.findall(r"<a [^>]*>", coloured))


def test_lines_pygments_would_split_stay_plain(logged_in_client, store):
    blob_id = made_by(store, "a = 1\rb = 2\nc = '<x>'\n", "Read", {"file_path": "m.py"})

    html = page(logged_in_client, blob_id)

    assert "coloured as" not in html
    assert 'id="L2"' in html and "&lt;x&gt;" in html and 'id="L3"' not in html


def test_a_grep_page_is_marked_not_coloured(logged_in_client, store):
    blob_id = made_by(store, "import os\nimport sys\n", "Read", {"file_path": "m.py"})

    html = page(logged_in_client, blob_id, "grep:sys")

    assert "pg-" not in html and "<mark>sys</mark>" in html


def test_colouring_stops_where_its_markup_would_outgrow_the_page():
    lines = ["x = (1, 2, 3)"] * 100

    out = coloured_lines(lines, lexer_for_file("a.py"), extra_budget=2_000)

    assert out is not None and out[0] is not None and out[-1] is None
    first_plain = out.index(None)
    assert all(line is None for line in out[first_plain:])


def test_the_helper_gives_each_line_back_in_pieces_of_its_own_text():
    lines = ['"""a', "multi-line", 'string"""', "", "y = '<&>'"]

    out = coloured_lines(lines, lexer_for_file("a.py"), extra_budget=10_000)

    assert out is not None and len(out) == len(lines)
    for line, pieces in zip(lines, out, strict=True):
        assert "".join(text for _, text in pieces or ()) == line  # raw: the template escapes
    assert ("s1", "'<&>'") in out[4]
    assert all(re.fullmatch(r"[a-z0-9]*", css) for pieces in out for css, _ in pieces or ())


def test_nothing_in_the_site_marks_text_safe():
    """Blob and session text is escaped by the templates, always: no view, tag or template
    marks anything safe or turns escaping off."""
    root = Path(__file__).resolve().parents[3]
    sources = [*(root / "blobviewer").rglob("*.py"), *(root / "templates").rglob("*.html")]
    unsafe = re.compile(r"mark_safe|SafeString|SafeData|\|\s*safe(seq)?\b|autoescape\s+off")
    found = [
        f"{path.relative_to(root)}:{number}"
        for path in sources
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if unsafe.search(line)
    ]
    assert found == []


def test_file_names_come_from_path_arguments_and_printing_commands():
    assert file_named_by("Read", {"file_path": "a/b.py"}) == "a/b.py"
    assert file_named_by("view", '{"path": "c.ts"}') == "c.ts"
    assert file_named_by("bash", {"command": "cat -n x.go"}) == "x.go"
    assert file_named_by("bash", {"command": ["tail", "-n", "5", "log.json"]}) == "log.json"
    assert file_named_by("bash", {"command": "ls -la"}) is None
    assert file_named_by("bash", {"command": "cat 'unclosed"}) is None
    assert file_named_by("bash", "not json") is None
    assert lexer_for_file("README.txt") is None and lexer_for_file("") is None
    assert looks_like_diff(DIFF) and not looks_like_diff("--- a heading\ntext\n")
    assert diff_lexer().name == "Diff"
