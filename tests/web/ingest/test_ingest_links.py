"""Symbolic links in the folders `manage.py ingest` searches or watches: one that leads
inside the folders given is followed, one that leads out of them is not (nor even opened)
and is said in one line, unless `--follow-links`; a PATH given that is itself a link is
followed (docs/recording.md#symbolic-links).

"Not opened" is counted, not inferred: an audit hook (sys.addaudithook) sees every file
the process opens, in this process and, through a sitecustomize module on PYTHONPATH, in a
real `manage.py ingest --watch` process.
"""

from __future__ import annotations

import json
import sys
import uuid
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command

from blobviewer.ingest.finding import Links, recording_paths
from blobviewer.ingest.watch import WatchRoot, recordings_changed
from blobviewer.models import Session
from web.ingest_process import Watching, run_ingest, wait_until
from web.records import header, user_item


def log(path: Path, session_id: uuid.UUID | None = None) -> uuid.UUID:
    """A session log of ours at *path*; its session id."""
    session_id = session_id or uuid.uuid4()
    lines = [header(session_id), user_item(1, "hello")]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return session_id


class Layout:
    """A folder given (`given/`) and one beside it (`outside/`): in `given/`, a recording,
    a link to another recording inside, a link to a recording outside, a link to a folder
    outside that holds one, and a link outside whose name is no recording's."""

    def __init__(self, root: Path) -> None:
        self.given = root / "given"
        self.outside = root / "outside"
        self.inside_id = log(self.given / "sub" / "real.jsonl")
        self.outside_id = log(self.outside / "elsewhere.jsonl")
        self.deep_id = log(self.outside / "folder" / "deep.jsonl")
        self.inside_link = self.given / "again.jsonl"
        self.inside_link.symlink_to(self.given / "sub" / "real.jsonl")
        self.file_link = self.given / "theirs.jsonl"
        self.file_link.symlink_to(self.outside / "elsewhere.jsonl")
        self.folder_link = self.given / "more"
        self.folder_link.symlink_to(self.outside / "folder")
        # Not a recording's name: passed over in silence.
        (self.given / "notes.txt").symlink_to(self.outside / "elsewhere.jsonl")

    def said(self) -> list[str]:
        return [
            f"{link}: a link to {target}, outside the folders given; not followed "
            "(--follow-links follows it)"
            for link, target in (
                (self.folder_link, self.outside / "folder"),
                (self.file_link, self.outside / "elsewhere.jsonl"),
            )
        ]


# --- which files a search finds ------------------------------------------------------------------


def test_a_search_follows_links_inside_and_passes_over_those_that_lead_out(
    tmp_path: Path,
) -> None:
    layout = Layout(tmp_path)
    links = Links([layout.given])

    found = recording_paths([layout.given], links=links)

    assert found == [(layout.inside_link, False), (layout.given / "sub" / "real.jsonl", False)]
    assert links.unsaid() == layout.said()
    assert links.unsaid() == []  # each said once


def test_with_follow_links_a_search_enters_linked_folders_once(tmp_path: Path) -> None:
    layout = Layout(tmp_path)
    (layout.given / "twice").symlink_to(layout.outside / "folder")
    (layout.outside / "folder" / "loop").symlink_to(layout.outside / "folder")

    found = recording_paths([layout.given], links=Links([layout.given], follow=True))

    deep = [path for path, _ in found if path.name == "deep.jsonl"]
    assert len(deep) == 1
    assert (layout.file_link, False) in found


def test_a_link_between_two_folders_given_leads_inside(tmp_path: Path) -> None:
    layout = Layout(tmp_path)
    links = Links([layout.given, layout.outside])

    found = {path for path, _ in recording_paths([layout.given], links=links)}

    assert layout.file_link in found
    assert links.unsaid() == []


def test_a_change_seen_through_a_link_that_leads_out_is_passed_over(tmp_path: Path) -> None:
    layout = Layout(tmp_path)
    roots = [WatchRoot.of(layout.given)]
    links = Links([layout.given])
    changed = [
        layout.file_link.absolute(),
        (layout.folder_link / "deep.jsonl").absolute(),  # as inotify reports it
        layout.inside_link.absolute(),
    ]

    assert recordings_changed(changed, roots, links) == [(layout.inside_link, False)]
    assert sorted(links.unsaid()) == layout.said()
    assert len(recordings_changed(changed, roots, Links([layout.given], follow=True))) == 3


def test_a_file_named_through_a_link_is_watched_where_it_leads(tmp_path: Path) -> None:
    layout = Layout(tmp_path)
    root = WatchRoot.of(layout.file_link)

    assert root.target == (layout.outside / "elsewhere.jsonl").resolve()
    assert recordings_changed([root.target], [root]) == [(layout.file_link, True)]


# --- ingest in this process: what is read, and what is opened -------------------------------------

_OPENED: list[str] | None = None


def _audit(event: str, args: tuple[Any, ...]) -> None:
    # A file opened, or a folder listed.
    listed = event in ("open", "os.scandir", "os.listdir") and args
    if _OPENED is not None and listed and isinstance(args[0], str | Path):
        _OPENED.append(str(args[0]))


sys.addaudithook(_audit)  # for the whole run (a hook cannot be removed): idle but here


def opened_while(run: Any) -> list[str]:
    """The paths this process opened while *run* ran."""
    global _OPENED
    _OPENED = []
    try:
        run()
        return _OPENED
    finally:
        _OPENED = None


@pytest.mark.django_db
def test_ingest_never_opens_what_a_link_leads_out_to_and_says_so(
    data_dir: Path, tmp_path: Path
) -> None:
    layout = Layout(tmp_path)
    out = StringIO()

    opened = opened_while(lambda: call_command("ingest", str(layout.given), stdout=out))

    assert str(layout.given / "sub" / "real.jsonl") in opened  # the hook sees what is read
    leads_out = (str(layout.outside), str(layout.file_link), str(layout.folder_link))
    assert not [path for path in opened if path.startswith(leads_out)]
    assert [line for line in out.getvalue().splitlines() if "a link to" in line] == layout.said()
    assert set(Session.objects.values_list("id", flat=True)) == {layout.inside_id}


@pytest.mark.django_db
def test_follow_links_ingests_what_they_lead_to(data_dir: Path, tmp_path: Path) -> None:
    layout = Layout(tmp_path)
    out = StringIO()

    call_command("ingest", "--follow-links", str(layout.given), stdout=out)

    assert "a link to" not in out.getvalue()
    recorded = set(Session.objects.values_list("id", flat=True))
    assert recorded == {layout.inside_id, layout.outside_id, layout.deep_id}


@pytest.mark.django_db
def test_a_path_given_that_is_a_link_is_followed(data_dir: Path, tmp_path: Path) -> None:
    layout = Layout(tmp_path)
    out = StringIO()

    call_command("ingest", str(layout.file_link), stdout=out)

    assert "a link to" not in out.getvalue()
    assert set(Session.objects.values_list("id", flat=True)) == {layout.outside_id}


# --- a real `manage.py ingest --watch` process --------------------------------------------------

AUDIT = """
import os, sys

_LOG = os.environ.get("INGEST_TEST_OPENED")


def _audit(event, args):
    # A file opened, or a folder listed.
    if event in ("open", "os.scandir", "os.listdir") and isinstance(
        args[0], (str, bytes, os.PathLike)
    ):
        with open(_LOG, "a", encoding="utf-8") as log:  # an open: audited, not logged twice
            log.write(os.fsdecode(args[0]) + "\\n")


if _LOG:
    sys.addaudithook(lambda event, args: args and args[0] != _LOG and _audit(event, args))
"""


def audited(tmp_path: Path) -> tuple[dict[str, str], Path]:
    """Environment for a command whose every open is written to the file returned."""
    hook = tmp_path / "hook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(AUDIT)
    opened = tmp_path / "opened.txt"
    return {"PYTHONPATH": str(hook), "INGEST_TEST_OPENED": str(opened)}, opened


def test_watching_never_opens_what_a_new_link_leads_out_to(tmp_path: Path) -> None:
    given, outside = tmp_path / "given", tmp_path / "outside"
    given.mkdir()
    outside_id = log(outside / "elsewhere.jsonl")
    deep_id = log(outside / "folder" / "deep.jsonl")
    env, opened = audited(tmp_path)
    watching = Watching([given], data=tmp_path / "data", logs=tmp_path / "logs", **env)
    try:
        watching.wait_for_output("watching ", bound=180)
        assert opened.exists()  # the hook is in: it saw the command start
        (given / "theirs.jsonl").symlink_to(outside / "elsewhere.jsonl")
        (given / "more").symlink_to(outside / "folder")
        # Said as soon as they are seen, with no recording of their own batch to ingest.
        wait_until(lambda: watching.out().count(": a link to") == 2, 15, "two lines", watching)
        later_id = log(tmp_path / "later.jsonl")
        (tmp_path / "later.jsonl").rename(given / "later.jsonl")
        watching.wait_for_items(later_id, 1)
        (outside / "elsewhere.jsonl").write_text((outside / "elsewhere.jsonl").read_text())
        log(outside / "folder" / "deeper.jsonl")  # a change seen through the linked folder
        again_id = log(tmp_path / "again.jsonl")
        (tmp_path / "again.jsonl").rename(given / "again.jsonl")
        watching.wait_for_items(again_id, 1)
        assert watching.stop() == 0
    finally:
        watching.kill()
    assert watching.items(outside_id) == watching.items(deep_id) == 0
    lines = [line for line in watching.out().splitlines() if "a link to" in line]
    assert sorted(line.split(":")[0] for line in lines) == [
        str(given / "more"),
        str(given / "theirs.jsonl"),
    ]
    reads = opened.read_text().splitlines()
    assert str(given / "later.jsonl") in reads  # the hook sees what is read
    leads_out = (str(outside), str(given / "theirs.jsonl"), str(given / "more"))
    assert not [path for path in reads if path.startswith(leads_out)]


def test_the_command_follows_them_with_follow_links(tmp_path: Path) -> None:
    layout = Layout(tmp_path)

    plain = run_ingest(layout.given, data=tmp_path / "plain")
    followed = run_ingest("--follow-links", layout.given, data=tmp_path / "followed")

    assert plain.returncode == followed.returncode == 0, plain.stderr + followed.stderr
    assert [line for line in plain.stdout.splitlines() if "a link to" in line] == layout.said()
    assert "4 of 4 files ingested" in followed.stdout
    assert "2 of 2 files ingested" in plain.stdout
