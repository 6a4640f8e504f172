"""`manage.py sessions export SESSION --format html`: a session's timeline as one HTML file
that needs no server: the session's facts, then every turn and message in order, each
step with its tool, arguments and output as on the session's page.

The file holds no script and no external file (the site's stylesheet is in a `<style>`
element); every recorded text goes through Django's escaping. What it holds is capped,
so that a session of big outputs makes a file people can open and send:

- a message's text or an output kept whole: its first TEXT_BYTES bytes;
- a promoted output: its summary (`[blob:<id>]` …), never more than BLOB_SHARE_BYTES, so
  a blob of any size takes at most that much of the file;
- a call's arguments: about ARGS_BYTES bytes, laid out as on the timeline.

Anything cut says how many bytes this file leaves out. The file is written a window of
items at a time (blobviewer.catalog.export_walk). See docs/export.md.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from django.contrib.staticfiles import finders
from django.template.loader import render_to_string

from blobviewer.catalog.export_walk import LoadedUnit, loaded_units, promoted_blob
from blobviewer.models import Item, Session
from blobviewer.timeline.skeleton import load_skeleton
from blobviewer.timeline.steps import Step, Unit, all_steps, build_units
from blobviewer.timeline.tool_args import ArgsView, arguments_view
from core.content import utf8_size

TEXT_BYTES = 16_000
BLOB_SHARE_BYTES = 1_000
ARGS_BYTES = 4_000
# Where the units go in the rendered page (template text, never a recorded text: those
# are escaped, so none can hold it).
_UNITS_HERE = "<!-- units -->"

Write = Callable[[str], object]  # what it returns (a count of characters) is ignored


@dataclass(frozen=True)
class Cut:
    """The start of a text that the file shows, and how many UTF-8 bytes it leaves out."""

    text: str
    more_bytes: int


@dataclass
class ExportedStep:
    """A step as the file shows it (the names _args.html reads: args, reader_url, call_url)."""

    step: Step
    result: Item | None
    output: Cut | None
    args: ArgsView | None
    title: str
    call_title: str = ""
    blob_id: uuid.UUID | None = None
    reader_url: str = ""  # an inspect call: the step whose blob it reads, in this file
    call_url: str = ""  # no item pages without the site


@dataclass
class ExportedUnit:
    unit: Unit
    item: Item | None  # a message's item
    text: Cut | None  # a message's text
    texts: list[tuple[Item, Cut]] = field(default_factory=list)  # a turn's texts
    steps: list[ExportedStep] = field(default_factory=list)


def write_html(session: Session, write: Write) -> None:
    """Write *session* as one self-contained HTML file through *write*, in pieces."""
    skeleton = load_skeleton(session)
    units = build_units(skeleton.rows)
    steps = all_steps(units)
    # A promoted output's first blob reference is its own blob: an inspect call of it
    # links to that step, in this file.
    producers = {
        skeleton.blobs_of[step.result.pk][0]: step.anchor
        for step in reversed(steps)
        if step.result is not None and step.promoted and skeleton.blobs_of.get(step.result.pk)
    }
    counts = {
        "steps": len(steps),
        "errors": sum(1 for step in steps if step.is_error),
        "unanswered": sum(1 for step in steps if step.result is None),
    }
    page = render_to_string(
        "export/session.html",
        {
            "session": session,
            "counts": counts,
            "css": "",
            "caps": {"text": TEXT_BYTES, "blob": BLOB_SHARE_BYTES, "args": ARGS_BYTES},
            "empty": not units,
        },
    )
    head, _, tail = page.partition(_UNITS_HERE)
    write(head.replace(_STYLESHEET_HERE, f"<style>{_stylesheet()}</style>", 1))
    for loaded in loaded_units(session, units):
        shown = _exported_unit(loaded, producers)
        write(render_to_string("export/_unit.html", {"shown_unit": shown}))
    write(tail)


def _exported_unit(loaded: LoadedUnit, producers: dict[uuid.UUID, str]) -> ExportedUnit:
    unit = loaded.unit
    if unit.kind == "message":
        item = loaded.items.get(unit.items[0].seq)
        text = cut(item.text, TEXT_BYTES) if item is not None else None
        return ExportedUnit(unit, item, text)
    shown = ExportedUnit(unit, None, None)
    for row in unit.items:
        item = loaded.items.get(row.seq)
        if item is not None and item.text:
            shown.texts.append((item, cut(item.text, TEXT_BYTES)))
    shown.steps = [_exported_step(step, loaded, producers) for step in unit.steps]
    return shown


def _exported_step(step: Step, loaded: LoadedUnit, producers: dict[uuid.UUID, str]) -> ExportedStep:
    result = loaded.item_of(step, result=True)
    assistant = loaded.item_of(step, result=False)
    call: Any = None
    if assistant is not None and step.call is not None:
        calls = assistant.tool_calls if isinstance(assistant.tool_calls, list) else []
        if step.call.index < len(calls) and isinstance(calls[step.call.index], dict):
            call = calls[step.call.index]
    args = None
    if call is not None:
        args = arguments_view(step.tool, call.get("arguments"), budget=ARGS_BYTES)
    title = call.get("title") if isinstance(call, dict) else None
    shown = ExportedStep(
        step=step,
        result=result,
        output=None,
        args=args,
        title=step.tool[:80],
        call_title=title if isinstance(title, str) else "",
    )
    if result is not None:
        shown.blob_id = promoted_blob(result)
        limit = BLOB_SHARE_BYTES if shown.blob_id is not None else TEXT_BYTES
        shown.output = cut(result.output, limit)
    inspected = step.call.inspect_blob if step.call is not None else None
    if inspected is not None and inspected in producers:
        shown.reader_url = f"#{producers[inspected]}"
    return shown


def cut(text: str, limit: int) -> Cut:
    """The start of *text* in at most *limit* UTF-8 bytes, never splitting a character."""
    head = text[:limit]  # a character is at least a byte: no more are needed
    data = head.encode("utf-8", "surrogatepass")
    if len(data) > limit:
        head = data[:limit].decode("utf-8", "ignore")
    if len(head) == len(text):
        return Cut(text, 0)
    return Cut(head, utf8_size(text) - utf8_size(head))


# Where the stylesheet goes: put in after the template is rendered, as it is (escaping
# would break its `>` selectors), so no template ever marks text safe.
_STYLESHEET_HERE = "<style></style>"  # escaped in any recorded text: only ours matches


def _stylesheet() -> str:
    """The site's stylesheet, whole, for the file's `<style>` element: our own file, not
    recorded content."""
    path = finders.find("css/site.css")
    css = Path(path).read_text(encoding="utf-8") if isinstance(path, str) else ""
    if "</" in css:  # it would end the <style> element early
        raise ValueError("static/css/site.css holds '</', which cannot go in a <style>")
    return css
