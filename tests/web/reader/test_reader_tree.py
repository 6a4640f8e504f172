"""JSON as a tree: `<details>` that work without JavaScript, shapes as summaries write
them (docs/promotion.md#content-kinds), keys and indexes linked to the selectors that
read them, long strings cut with a link to read them whole, a bounded size, and a big
blob's first page from its rendering."""

from __future__ import annotations

import json
import re
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest
from django.urls import reverse

from blobviewer.reader.json_tree import (
    NESTED_CHILDREN,
    STRING_CHARS,
    Head,
    TooBig,
    rendered_head,
    tree_of_value,
)
from core.json_values import dumps_indented
from core.selectors import parse_selector
from core.store.file_reader import FileReader

pytestmark = pytest.mark.django_db


def url_of(selector: str) -> str:
    return f"?selector={selector}"


def tree_html(client, blob_id, selector=None) -> str:
    query = {"selector": selector} if selector else {}
    html = client.get(reverse("blob_detail", args=[blob_id]), query).content.decode()
    tree = re.search(
        r'<div class="json-tree".*?</ul>(?:<p class="jt-more">.*?</p>)?</div>', html, re.S
    )
    assert tree, "no tree on the page"
    return tree.group(0)


def links(html: str) -> dict[str, str]:
    """The tree's links: their text, and the selector they open."""
    found = {}
    for href, text in re.findall(r'<a class="jt-k[^"]*" href="([^"]+)">([^<]*)</a>', html):
        query = parse_qs(urlsplit(href.replace("&amp;", "&")).query)
        found[text] = query["selector"][0]
    return found


def test_it_draws_nested_values_as_details_with_their_shapes(logged_in_client, json_blob):
    blob_id = json_blob({"items": [{"id": 1, "ok": True, "none": None}], "name": "x" * 5})

    html = tree_html(logged_in_client, blob_id)

    assert '<details open><summary><a class="jt-k"' in html
    assert '<span class="jt-shape">array[1]</span>' in html
    assert '<span class="jt-shape">object{3}</span>' in html
    assert '<span class="jt-num">1</span>' in html
    assert '<span class="jt-bool">true</span>' in html
    assert '<span class="jt-null">null</span>' in html
    assert '<span class="jt-str">&quot;xxxxx&quot;</span>' in html


def test_each_key_and_index_links_to_its_selector(logged_in_client, json_blob):
    blob_id = json_blob({"items": [{"id": 1, "tags": ["a"]}], "meta": {"page": {"n": 2}}})

    found = links(tree_html(logged_in_client, blob_id))

    assert found["items"] == "key:items"
    assert found["0"] == "key:items | slice:0..1"
    assert found["meta"] == "key:meta"
    assert found["page"] == "key:meta | key:page"
    assert found["n"] == "key:meta | key:page | key:n"
    # Keys inside an entry: key: over the one-entry array that slice: gives.
    assert found["id"] == "key:items | slice:0..1 | key:id"
    assert found["tags"] == "key:items | slice:0..1 | key:tags"
    # An index inside an entry: a slice of the one-entry array is not the inner array's.
    assert "0" not in {label for label, href in found.items() if href.endswith("key:tags")}


def test_a_key_inside_an_entry_links_to_a_selector_that_shows_it(logged_in_client, json_blob):
    blob_id = json_blob([{"user": {"login": "ada"}}, {"user": None}, 7])

    found = links(tree_html(logged_in_client, blob_id))
    assert found["login"] == "slice:0..1 | key:user | key:login"

    def page(selector: str) -> str:
        url = reverse("blob_detail", args=[blob_id])
        return logged_in_client.get(url, {"selector": selector}).content.decode()

    assert "1 value, 0 missing" in page(found["login"])
    assert "&quot;ada&quot;" in tree_html(logged_in_client, blob_id, found["login"])
    assert "3 values, 2 missing" in page("key:user | key:login")


def test_links_build_on_the_current_selector(logged_in_client, json_blob):
    blob_id = json_blob({"data": {"items": [[1, 2], [3]] * 3}})

    found = links(tree_html(logged_in_client, blob_id, "key:data | key:items | slice:2..4"))

    # The slice's entries keep their indexes in the whole array, replacing the window.
    assert found == {
        "2": "key:data | key:items | slice:2..3",
        "3": "key:data | key:items | slice:3..4",
    }


def test_a_long_string_is_cut_with_a_link_that_reads_it_whole(logged_in_client, json_blob):
    long = "é" * (STRING_CHARS + 100)
    blob_id = json_blob({"log": {"text": long}})

    html = tree_html(logged_in_client, blob_id)

    assert "é" * STRING_CHARS in html and "é" * (STRING_CHARS + 1) not in html
    assert f"… 200 more bytes of string({STRING_CHARS + 100})" in html
    whole = re.search(r'<a href="([^"]+)">read it whole</a>', html).group(1)
    assert parse_qs(urlsplit(whole).query)["selector"] == ["key:log | key:text"]


def test_a_key_that_needs_quoting_links_to_its_quoted_selector(logged_in_client, json_blob):
    blob_id = json_blob({"a | b": 1, " edge ": 2})

    found = links(tree_html(logged_in_client, blob_id))

    assert found["a | b"] == 'key:"a | b"'
    assert found["&quot; edge &quot;"] == 'key:" edge "'
    for selector in found.values():
        parse_selector(selector)  # every link is a selector the parser reads


def test_big_containers_show_their_first_children_and_read_on(logged_in_client, json_blob):
    blob_id = json_blob(
        {"many": list(range(NESTED_CHILDREN + 30)), "keys": {f"k{n}": n for n in range(80)}}
    )

    html = tree_html(logged_in_client, blob_id)

    assert "… 30 more entries" in html and "… 30 more keys" in html
    more = re.findall(r'<li class="jt-more">… [^<]*<a href="([^"]+)">read on</a>', html)
    selectors = [
        parse_qs(urlsplit(href.replace("&amp;", "&")).query)["selector"][0] for href in more
    ]
    assert selectors == [
        f"key:many | slice:{NESTED_CHILDREN}..{NESTED_CHILDREN + 30}",
        f"key:keys | keys:{NESTED_CHILDREN}..80",
    ]


def test_many_entries_start_closed_with_a_preview(logged_in_client, json_blob):
    blob_id = json_blob([{"n": n, "name": f"entry {n}"} for n in range(100)])

    html = tree_html(logged_in_client, blob_id)

    assert "<details open>" not in html
    assert (
        '<span class="jt-preview">{&quot;n&quot;:0,&quot;name&quot;:&quot;entry 0&quot;}</span>'
        in html
    )


def test_a_hostile_value_stays_text_in_the_tree(logged_in_client, json_blob):
    hostile = '<script>alert(1)</script><img src=x onerror="alert(2)">'
    blob_id = json_blob({hostile: [hostile, {hostile: hostile}], "x": hostile * 50})

    html = tree_html(logged_in_client, blob_id)

    assert "<script>" not in html and "<img" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html


def test_the_tree_of_a_huge_value_stays_within_its_budget():
    value = [{"n": n, "deep": [{"x": "y" * 50}] * 5} for n in range(20_000)]

    tree = tree_of_value(value, selector=parse_selector(""), url=url_of, budget=50_000)

    assert 0 < tree.shown < 20_000 and not tree.complete
    opened = sum(node.kind == "open" for node in tree.nodes)
    closed = sum(node.kind == "close" for node in tree.nodes)
    assert opened == closed  # every container the tree opens, it closes
    size = sum(len(n.label) + len(n.text) + len(n.href) + 60 for n in tree.nodes)
    assert size < 60_000


def test_deep_nesting_is_drawn_to_a_depth_and_linked_beyond(logged_in_client, json_blob):
    value: object = "bottom"
    for _ in range(200):
        value = {"d": value}
    blob_id = json_blob(value)

    html = tree_html(logged_in_client, blob_id)

    assert "bottom" not in html
    assert html.count("<details") < 20


def test_raw_shows_the_indented_text_with_line_numbers(logged_in_client, json_blob):
    blob_id = json_blob({"a": [1, 2]})

    html = logged_in_client.get(
        reverse("blob_detail", args=[blob_id]), {"as": "raw"}
    ).content.decode()

    assert '<span class="r"><span class="ln">3</span>    1,\n</span>' in html
    assert '<div class="json-tree"' not in html
    assert '<span class="on" aria-current="true">Raw</span>' in html


def test_the_tree_and_raw_switch_keep_the_selector(logged_in_client, json_blob):
    blob_id = json_blob({"a": [1, 2]})

    html = logged_in_client.get(
        reverse("blob_detail", args=[blob_id]), {"selector": "key:a"}
    ).content.decode()

    raw = re.search(r'<a href="([^"]+)"[^>]*>Raw</a>', html).group(1).replace("&amp;", "&")
    assert parse_qs(urlsplit(raw).query) == {"selector": ["key:a"], "as": ["raw"]}
    # The box keeps the mode when a new selector is asked for in raw.
    raw_html = logged_in_client.get(raw).content.decode()
    assert '<input type="hidden" name="as" value="raw">' in raw_html


def head_of(path: Path, **options: int) -> Head | None:
    with FileReader(path) as rendering:
        return rendered_head(rendering, **options)


def write_rendering(tmp_path: Path, value: object) -> Path:
    path = tmp_path / "rendering.txt"
    path.write_text(dumps_indented(value), encoding="utf-8")
    return path


def test_a_head_reads_the_first_entries_of_an_array(tmp_path):
    value = [{"n": n, "nested": {"list": [1, 2, {"x": n}]}} for n in range(50)] + ["s", 3, None]
    path = write_rendering(tmp_path, value)

    head = head_of(path, limit=1_000)

    assert head is not None and head.container == "array"
    assert head.entries == list(enumerate(value))


def test_a_head_reads_the_first_pairs_of_an_object(tmp_path):
    value = {"a": [1, {"b": "}],"}], 'weird "key": x': {"c": {}}, "e": "", "f": []}
    path = write_rendering(tmp_path, value)

    head = head_of(path, limit=1_000)

    assert head is not None and head.container == "object"
    assert head.entries == list(value.items())


def test_a_head_stops_at_an_entry_too_big_for_what_it_read(tmp_path):
    value = {"small": 1, "huge": {"text": "z" * 5_000}, "after": 2}
    path = write_rendering(tmp_path, value)

    head = head_of(path, limit=1_000, max_bytes=1_000)

    assert head is not None
    assert head.entries == [("small", 1), ("huge", TooBig("object"))]


def test_a_head_reads_at_most_its_limit(tmp_path):
    path = write_rendering(tmp_path, list(range(100)))

    head = head_of(path, limit=10)

    assert head is not None and head.entries == list(enumerate(range(10)))


@pytest.mark.parametrize("text", ["", "42", '"a string"', "[\n  1,", json.dumps([1, 2])])
def test_a_head_of_something_else_is_none_or_partial(tmp_path, text):
    path = tmp_path / "rendering.txt"
    path.write_text(text, encoding="utf-8")

    head = head_of(path, limit=10)

    assert head is None or all(isinstance(label, int) for label, _ in head.entries)


def test_raw_links_back_to_the_tree(logged_in_client, json_blob):
    blob_id = json_blob({"a": [1, 2]})

    html = logged_in_client.get(
        reverse("blob_detail", args=[blob_id]), {"selector": "key:a", "as": "raw"}
    ).content.decode()

    tree = re.search(r'<a href="([^"]+)"[^>]*>Tree</a>', html).group(1).replace("&amp;", "&")
    assert parse_qs(urlsplit(tree).query) == {"selector": ["key:a"]}
