"""The HTML export read with no server: opened from a file URL in Chromium, it logs no
error, asks for nothing outside itself, and its lines wrap on a phone's width."""

from __future__ import annotations

from io import StringIO
from pathlib import Path

from django.core.management import call_command

REAL = Path(__file__).resolve().parents[1] / "fixtures" / "real"
CLAUDE_RUN_ID = "a7da6a22-facc-4fcd-8bab-f83c87862004"


def test_the_export_reads_from_a_file_url_with_nothing_else(
    new_page, data_dir, transactional_db, tmp_path
):
    call_command("ingest", str(REAL / f"{CLAUDE_RUN_ID}.jsonl"), stdout=StringIO())
    (tmp_path / "export").mkdir()
    exported = tmp_path / "export" / "run.html"
    call_command("sessions", "export", CLAUDE_RUN_ID, "--format", "html", "-o", str(exported))

    for width in (1440, 390):
        page = new_page()
        page.set_viewport_size({"width": width, "height": 900})
        requests: list[str] = []
        page.on("request", lambda request, seen=requests: seen.append(request.url))
        page.goto(exported.as_uri())
        page.wait_for_load_state("load")

        assert requests == [exported.as_uri()]
        assert page.problems.console_errors == []
        assert page.locator("section.step").count() == 108
        # The stylesheet is in the file: the facts are laid out as on the site.
        assert page.locator("dl.facts").evaluate("e => getComputedStyle(e).display") == "grid"
        # Long lines wrap: nothing is wider than the window.
        assert page.evaluate("document.documentElement.scrollWidth") <= width
