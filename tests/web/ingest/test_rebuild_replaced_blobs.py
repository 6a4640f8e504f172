"""A rebuild that re-derives an output into a new blob (here: a Codex MCP result stored as
a JSON array of content blocks by the importer before core.tool_text, as text now) leaves
links to the old blob working: the blob page redirects to the new one and says so, and a
share link of the old blob shows the new one."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import call_command
from django.urls import reverse

from blobviewer.ingest.importers import codex, recording
from blobviewer.models import Blob, Item, ShareLink
from core.store.blob_id import BLOB_REF
from importers.test_codex import meta, write
from importers.test_codex import user as user_line
from importers.test_wrapped_outputs import BIG, mcp_call, mcp_output

pytestmark = pytest.mark.django_db


def ingest(*args: object) -> None:
    call_command("ingest", *[str(a) for a in args], stdout=StringIO(), stderr=StringIO())


def step_blob() -> Blob:
    step = Item.objects.get(type=Item.Type.TOOL_RESULT)
    return Blob.objects.get(id=BLOB_REF.match(step.output).group(1))


@pytest.fixture
def rebuilt(data_dir, tmp_path, monkeypatch, user):
    """(old blob, new blob, a share link of the old one) after a rebuild."""
    path = write(
        tmp_path / "rollout-2026-01-02T10-00-00-0199a8e0-0000-7000-8000-000000000001.jsonl",
        [
            meta(),
            user_line("read the docs"),
            mcp_call("c1", "mcp__docs__fetch"),
            mcp_output("c1", BIG),
        ],
    )
    with monkeypatch.context() as before:  # the importer as it was: outputs as recorded
        before.setattr(codex, "IMPORTER_VERSION", codex.IMPORTER_VERSION - 1)
        before.setattr(recording, "step_output_text", lambda output: (output, ""))
        ingest(path)
    old = step_blob()
    assert old.kind == "json_array"
    share = ShareLink.objects.create(blob=old, selector="slice:0..1", created_by=user)

    ingest("--rebuild", path)

    new = step_blob()
    assert (new.kind, new.count) == ("text", 2000)
    old.refresh_from_db()
    assert old.replaced_by_id == new.id
    return old, new, share


def test_the_old_blob_page_redirects_to_the_new_blob_and_says_so(rebuilt, logged_in_client):
    old, new, _ = rebuilt
    response = logged_in_client.get(reverse("blob_detail", args=[old.id]), {"selector": "x"})
    assert response.status_code == 302
    assert response["Location"] == (
        f"{reverse('blob_detail', args=[new.id])}?selector=x&replaced={old.id}"
    )

    page = logged_in_client.get(response["Location"]).content.decode()
    assert f"This link named blob <code>{old.id}</code>" in page
    assert (
        "01999 | ünïcode"
        in logged_in_client.get(
            reverse("blob_detail", args=[new.id]), {"selector": "lines:2000"}
        ).content.decode()
    )


def test_a_replaced_note_is_only_shown_for_the_blob_it_names(rebuilt, logged_in_client):
    old, new, _ = rebuilt
    page = logged_in_client.get(reverse("blob_detail", args=[old.id]), follow=True)
    assert page.redirect_chain[-1][0].endswith(f"replaced={old.id}")
    other = logged_in_client.get(reverse("blob_detail", args=[new.id]), {"replaced": new.id})
    assert other.status_code == 200 and b"This link named blob" not in other.content


def test_a_share_link_of_the_old_blob_shows_the_new_one(rebuilt, client):
    old, new, share = rebuilt
    page = client.get(reverse("share_detail", args=[share.token]), {"selector": "lines:1-2"})
    assert page.status_code == 200
    text = page.content.decode()
    assert f"This link named blob <code>{old.id}</code>" in text
    assert "00001 | ünïcode" in text
    raw = client.get(reverse("share_raw", args=[share.token]))
    assert b"".join(raw.streaming_content).decode() == BIG
