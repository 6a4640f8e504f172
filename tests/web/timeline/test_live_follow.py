"""Live follow's question (`/sessions/<id>/live`): 204 while nothing is new, the bar of
news once the session grew, one query whatever the session's size."""

from __future__ import annotations

import re
import uuid
from datetime import timedelta

from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from blobviewer.data_dir import blob_store
from blobviewer.ingest.sessions import ingest_session
from blobviewer.models import Session
from web.records import header, tool_result_item, user_item


def record(session_id: uuid.UUID, *items: dict) -> Session:
    ingest_session(header(session_id), list(items), source_path="t", store=blob_store())
    return Session.objects.get(id=session_id)


def ask(client, session: Session, items: int, steps: int):
    url = reverse("session_live", args=[session.id])
    return client.get(url, {"items": items, "steps": steps})


def test_nothing_new_is_a_204_and_growth_is_the_bar(logged_in_client, data_dir):
    session_id = uuid.uuid4()
    session = record(session_id, user_item(1, "go"))
    assert ask(logged_in_client, session, session.item_count, session.step_count).status_code == 204

    grown = record(
        session_id,
        user_item(1, "go"),
        tool_result_item(2, "one", call_id="a"),
        tool_result_item(3, "two", call_id="b"),
    )
    response = ask(logged_in_client, session, session.item_count, session.step_count)

    assert response.status_code == 200
    html = response.content.decode()
    assert f'data-items="{grown.item_count}"' in html
    assert "2 new items" in html or f"{grown.step_count} new step" in html
    assert ask(logged_in_client, grown, grown.item_count, grown.step_count).status_code == 204


def test_the_question_costs_one_query_whatever_the_size(logged_in_client, data_dir):
    session = record(uuid.uuid4(), *(user_item(n, f"line {n}") for n in range(1, 400)))
    logged_in_client.get("/")  # the login's own queries, once
    with CaptureQueriesContext(connection) as queries:
        assert ask(logged_in_client, session, 0, 0).status_code == 200
    asked = [q for q in queries.captured_queries if "blobviewer_session" in q["sql"]]
    assert len(asked) == 1


def test_an_unknown_session_is_a_404_and_the_last_page_is_named(logged_in_client, data_dir):
    missing = reverse("session_live", args=[uuid.uuid4()])
    assert logged_in_client.get(missing).status_code == 404
    session = record(uuid.uuid4(), *(user_item(n, f"line {n}") for n in range(1, 200)))
    last = logged_in_client.get(session.get_absolute_url(), {"page": "last"}).content.decode()
    assert "line 199" in last and "line 1<" not in last


def test_the_list_marks_a_session_that_grew_in_the_last_minute(logged_in_client, data_dir):
    fresh = record(uuid.uuid4(), user_item(1, "fresh run"))
    old = record(uuid.uuid4(), user_item(1, "old run"))
    Session.objects.filter(id=old.id).update(updated_at=timezone.now() - timedelta(minutes=2))

    html = logged_in_client.get(reverse("session_list")).content.decode()

    rows = dict(
        re.findall(r'<td class="title"><a href="/sessions/([^/]+)/">[^<]*</a>(.*?)</td>', html)
    )
    assert "live-dot" in rows[str(fresh.id)] and "live-dot" not in rows[str(old.id)]
    assert '<script src="/static/js/session_list' in html
