"""The session table fits 1280 and 1440 px wide screens: no column clipped or scrolled
out of sight, with the real recordings' titles, models and statuses in it."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import call_command

from importers.recordings import FIXTURES


@pytest.mark.parametrize("width", [1280, 1440])
def test_the_session_table_fits_the_screen(page, live_server, data_dir, width):
    call_command("ingest", str(FIXTURES), stdout=StringIO(), stderr=StringIO())
    page.set_viewport_size({"width": width, "height": 900})
    page.goto(f"{live_server.url}/")

    scroll, client = page.evaluate(
        "(() => { const box = document.querySelector('.table-scroll');"
        " return [box.scrollWidth, box.clientWidth]; })()"
    )
    assert scroll <= client
    # A status or model that fits a column is not cut into pieces: one line each.
    lines = page.evaluate(
        "(() => [...document.querySelectorAll('table.sessions td.status, table.sessions td.model')]"
        ".filter(td => ['task_complete', 'submitted', 'claude-opus-4-6'].includes(td.textContent))"
        ".map(td => { const r = document.createRange(); r.selectNodeContents(td);"
        " return r.getClientRects().length; }))()"
    )
    assert lines and set(lines) == {1}
