"""The compare page (/compare/<a>/<b>/) of two runs of one task made from the real
Claude Code recording (tests/web/compare/pairs.py): facts side by side, steps aligned
with the gap where B left one out, the first divergence, a pair's output diff a page at a
time, and choosing a run to compare with."""

from __future__ import annotations

import re
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command

from blobviewer.compare.pages import ROWS_PER_PAGE, AlignedRuns
from blobviewer.models import Item, Session
from importers.recordings import CLAUDE_SESSION
from web.compare.pairs import B_SESSION, CHANGED_CALL, write_pair

pytestmark = pytest.mark.django_db


@pytest.fixture
def runs(tmp_path: Path, client, user) -> tuple[Session, Session]:
    a, b = write_pair(tmp_path)
    call_command("ingest", str(a), str(b), stdout=StringIO(), stderr=StringIO())
    client.force_login(user)
    return Session.objects.get(id=CLAUDE_SESSION), Session.objects.get(id=B_SESSION)


def text_of(html: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html))


def pairs_on(html: str) -> dict[int, str]:
    """Each pair shown: its number and its relation (its class)."""
    found = re.findall(r'<li id="pair-(\d+)" class="pair ([a-z-]+)', html)
    return {int(number): relation for number, relation in found}


def test_the_runs_are_aligned_and_part_ways_where_b_left_a_step_out(runs, client) -> None:
    a, b = runs
    response = client.get(f"/compare/{a.id}/{b.id}/")
    assert response.status_code == 200
    html = response.content.decode()
    assert len(response.content) < 200_000
    text = text_of(html)
    assert a.step_count == b.step_count + 1
    assert "Steps: 106 the same, 1 with another output, 1 only in A, 0 only in B." in text
    # The steps differ in number: that fact is marked; the model is the same: not marked.
    assert re.search(r'<tr class="differs"><th scope="row">Steps</th>', html)
    assert re.search(r'<tr class=""><th scope="row">Model</th>', html)
    shown = pairs_on(html)
    assert len(shown) == ROWS_PER_PAGE
    only_a = [number for number, relation in shown.items() if relation == "only-a"]
    assert only_a == [3]
    assert 'href="?page=1#pair-3">step pair 3</a>' in html
    assert 'id="pair-3" class="pair only-a first"' in html
    # Each side's step opens its item page.
    first_a = Item.objects.filter(session=a, type="tool_result").order_by("seq").first()
    first_b = Item.objects.filter(session=b, type="tool_result").order_by("seq").first()
    assert f'href="/sessions/{a.id}/items/{first_a.seq}/"' in html
    assert f'href="/sessions/{b.id}/items/{first_b.seq}/"' in html


def test_the_pair_with_another_output_links_its_diff_and_blobs(runs, client) -> None:
    a, b = runs
    html = client.get(f"/compare/{a.id}/{b.id}/").content.decode()
    differs = [number for number, relation in pairs_on(html).items() if relation == "differs"]
    assert len(differs) == 1
    item_a = Item.objects.get(session=a, type="tool_result", call_id=CHANGED_CALL)
    item_b = Item.objects.get(session=b, type="tool_result", call_id=CHANGED_CALL)
    assert f"/compare/{a.id}/{b.id}/diff?a={item_a.seq}&amp;b={item_b.seq}" in html
    assert f'href="/blobs/{item_a.output[6:42]}/"' in html
    assert f'href="/blobs/{item_b.output[6:42]}/"' in html
    later = pairs_on(client.get(f"/compare/{a.id}/{b.id}/", {"page": 2}).content.decode())
    assert min(later) == ROWS_PER_PAGE + 1 and max(later) == 2 * ROWS_PER_PAGE
    pages = -(-a.step_count // ROWS_PER_PAGE)
    last = pairs_on(client.get(f"/compare/{a.id}/{b.id}/", {"page": pages}).content.decode())
    assert max(last) == a.step_count


def test_a_pairs_output_diff_comes_a_page_at_a_time(runs, client) -> None:
    a, b = runs
    item_a = Item.objects.get(session=a, type="tool_result", call_id=CHANGED_CALL)
    item_b = Item.objects.get(session=b, type="tool_result", call_id=CHANGED_CALL)
    url = f"/compare/{a.id}/{b.id}/diff"
    first = client.get(url, {"a": item_a.seq, "b": item_b.seq}).content.decode()
    removed = re.findall(r'<span class="removed">-(.*?)</span>', first)
    added = re.findall(r'<span class="added">\+(.*?)</span>', first)
    assert removed and len(removed) == len(added)
    assert all(new.endswith("# changed") for new in added)
    assert "see the rest of the diff" in first and "page=2" in first
    second = client.get(url, {"a": item_a.seq, "b": item_b.seq, "page": 2}).content.decode()
    more = re.findall(r'<span class="added">\+(.*?)</span>', second)
    assert more and set(more).isdisjoint(added)
    # Every changed line is shown once over the pages (358 lines, every other one).
    pages, page = [first, second], 2
    while "see the rest of the diff" in pages[-1]:
        page += 1
        pages.append(
            client.get(url, {"a": item_a.seq, "b": item_b.seq, "page": page}).content.decode()
        )
    changed = sum(len(re.findall(r'<span class="added">', html)) for html in pages)
    assert changed == 358 // 2
    # The full page of a diff, without htmx, has its way back.
    assert f'href="/compare/{a.id}/{b.id}/"' in first


def test_the_same_output_and_missing_steps(runs, client) -> None:
    a, b = runs
    first_b = Item.objects.filter(session=b, type="tool_result").order_by("seq")[0]
    first_a = Item.objects.get(session=a, type="tool_result", call_id=first_b.call_id)
    same = client.get(f"/compare/{a.id}/{b.id}/diff", {"a": first_a.seq, "b": first_b.seq})
    assert "The outputs are the same, line for line." in same.content.decode()
    assert client.get(f"/compare/{a.id}/{b.id}/diff", {"a": 99999, "b": 1}).status_code == 404
    assert client.get(f"/compare/{a.id}/0196a1b2-0000-7000-8000-00000000dead/").status_code == 404
    assert client.get(f"/compare/{a.id}/{b.id}/", {"page": "x"}).status_code == 200


def test_a_session_offers_the_other_runs_of_its_task_then_any_session(runs, client) -> None:
    a, b = runs
    page = client.get(a.get_absolute_url()).content.decode()
    assert f'href="/sessions/{a.id}/compare/"' in page
    assert f'href="/compare/{a.id}/{b.id}/"' in page  # in the other runs of its task
    pick = client.get(f"/sessions/{a.id}/compare/").content.decode()
    assert f'href="/compare/{a.id}/{b.id}/"' in pick
    found = client.get(f"/sessions/{a.id}/compare/", {"q": "warmup"}).content.decode()
    assert text_of(found).count("Claude Code warmup") >= 2
    nothing = client.get(f"/sessions/{a.id}/compare/", {"q": "no such title"}).content.decode()
    assert "No other session has" in nothing


def test_a_diff_of_outputs_no_longer_stored_says_so(runs, client, data_dir) -> None:
    a, b = runs
    item_a = Item.objects.get(session=a, type="tool_result", call_id=CHANGED_CALL)
    item_b = Item.objects.get(session=b, type="tool_result", call_id=CHANGED_CALL)
    for blob in (data_dir / "blobs").rglob(f"{item_a.output[6:42]}*"):
        blob.unlink()
    response = client.get(f"/compare/{a.id}/{b.id}/diff", {"a": item_a.seq, "b": item_b.seq})
    assert response.status_code == 200
    assert "The outputs cannot be read" in response.content.decode()


def test_hostile_parameters_are_answered_not_failed(runs, client) -> None:
    a, b = runs
    item_a = Item.objects.get(session=a, type="tool_result", call_id=CHANGED_CALL)
    item_b = Item.objects.get(session=b, type="tool_result", call_id=CHANGED_CALL)
    far = client.get(
        f"/compare/{a.id}/{b.id}/diff", {"a": item_a.seq, "b": item_b.seq, "page": 10**12}
    )
    assert far.status_code == 200 and "No more differences." in far.content.decode()
    nul = client.get(f"/sessions/{a.id}/compare/", {"q": "warm\x00up"})
    assert nul.status_code == 200 and "Claude Code warmup" in nul.content.decode()


def test_only_the_shown_page_of_pairs_is_made_into_rows(runs, client, monkeypatch) -> None:
    """Beyond reading and aligning the runs, the page's work does not grow with them: it
    makes rows for its own fifty pairs and the first divergence, whatever the page."""
    a, b = runs
    made = []
    real_row = AlignedRuns.row
    monkeypatch.setattr(AlignedRuns, "row", lambda self, n: made.append(n) or real_row(self, n))
    last = client.get(f"/compare/{a.id}/{b.id}/", {"page": 3})
    assert last.status_code == 200
    shown = pairs_on(last.content.decode())
    assert sorted(shown) == list(range(2 * ROWS_PER_PAGE + 1, 109))
    assert sorted(made) == [3, *shown]  # the divergence (pair 3) and the rows shown
