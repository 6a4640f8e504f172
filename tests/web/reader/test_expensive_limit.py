"""A server-wide limit on expensive selector evaluations (docs/pages.md#expensive-selectors).

A `grep:` step, or any selector on a blob over BLOBVIEWER_EXPENSIVE_BYTES, needs one of
BLOBVIEWER_EXPENSIVE_CONCURRENCY slots: lock files `<data>/locks/expensive-<n>.lock`
held with `flock`, shared by every process and thread of the server. With every slot
taken a request waits up to BLOBVIEWER_EXPENSIVE_WAIT_SECONDS, then gets 429 with a
one-line message: beside the selector box on a page, as text/plain from the API.

The tests take slots the way another worker process would: by flocking the lock files.
"""

from __future__ import annotations

import fcntl
import os
import re
import subprocess
import sys
import threading
import uuid
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import timezone
from django.utils.html import escape

from blobviewer.catalog.blobs import refresh_blob
from blobviewer.models import ShareLink
from blobviewer.reader import slots as expensive
from blobviewer.reader.slots import Busy, busy_message, evaluation_slot, is_expensive
from core.content import Structured, Text
from core.selectors import parse_selector
from core.store import FsBlobStore

pytestmark = pytest.mark.django_db

HTMX = {"HX-Request": "true"}
ERROR_BESIDE_THE_BOX = re.compile(r'<p class="error" id="[^"]*-error" role="alert">(.*?)</p>', re.S)


@pytest.fixture(autouse=True)
def limits(settings: Any, data_dir: Path) -> Any:
    """Two slots, no waiting (a test that needs a wait sets one), 10 MB blobs are big."""
    settings.BLOBVIEWER_EXPENSIVE_CONCURRENCY = 2
    settings.BLOBVIEWER_EXPENSIVE_WAIT_SECONDS = 0
    settings.BLOBVIEWER_EXPENSIVE_BYTES = 10 * 1024 * 1024
    return settings


class Slots:
    """The lock files of the limit, taken and freed as another process would."""

    def __init__(self, data_dir: Path) -> None:
        self.folder = data_dir / "locks"
        self.held: dict[int, int] = {}

    def take(self, *numbers: int) -> None:
        self.folder.mkdir(exist_ok=True)
        for n in numbers:
            fd = os.open(self.folder / f"expensive-{n}.lock", os.O_RDWR | os.O_CREAT)
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # raises if someone has it
            self.held[n] = fd

    def free(self, n: int) -> None:
        os.close(self.held.pop(n))

    def free_all(self) -> None:
        for n in list(self.held):
            self.free(n)


@pytest.fixture
def slots(data_dir: Path) -> Iterator[Slots]:
    taken = Slots(data_dir)
    yield taken
    taken.free_all()


@pytest.fixture
def small_text(store: FsBlobStore) -> uuid.UUID:
    blob_id = store.store_sync(Text("".join(f"line {n}\n" for n in range(1, 101))))
    refresh_blob(blob_id, store=store)
    return blob_id


@pytest.fixture
def share_of(user: Any) -> Callable[[uuid.UUID], ShareLink]:
    def make(blob_id: uuid.UUID) -> ShareLink:
        expires = timezone.now() + timedelta(days=1)
        return ShareLink.objects.create(
            blob_id=blob_id, selector="", created_by=user, expires_at=expires
        )

    return make


def page_answers(client: Client, url: str, selector: str, **headers: str) -> tuple[int, list]:
    response = client.get(url, {"selector": selector}, headers=headers)
    return response.status_code, ERROR_BESIDE_THE_BOX.findall(response.content.decode())


def every_entry_point(
    logged_in_client: Client, blob_id: uuid.UUID, link: ShareLink, selector: str
) -> dict[str, tuple[int, Any]]:
    """How each entry point that evaluates a selector answers *selector* on the blob."""
    page = reverse("blob_detail", args=[blob_id])
    shared = reverse("share_detail", args=[link.token])
    api = logged_in_client.get(reverse("api_inspect", args=[blob_id]), {"selector": selector})
    return {
        "page": page_answers(logged_in_client, page, selector),
        "fragment": page_answers(logged_in_client, page, selector, **HTMX),
        "share page": page_answers(Client(), shared, selector),
        "api": (api.status_code, api.content.decode()),
    }


def busy() -> dict[str, tuple[int, Any]]:
    """How every entry point answers when no slot frees in time."""
    beside_the_box = (429, [escape(busy_message())])
    return {
        "page": beside_the_box,
        "fragment": beside_the_box,
        "share page": beside_the_box,
        "api": (429, busy_message()),
    }


# -- 429 when every slot is taken -----------------------------------------------------------


def test_a_grep_gets_429_with_a_one_line_message_when_every_slot_is_taken(
    logged_in_client, small_text, share_of, slots
):
    slots.take(0, 1)

    answers = every_entry_point(logged_in_client, small_text, share_of(small_text), "grep:line")

    assert answers == busy()
    assert busy_message() == (
        "the server is busy with other expensive selectors (grep:, or any selector on a blob "
        "over 10 MB); try again in a moment"
    )


def test_it_succeeds_once_a_slot_is_free_again(logged_in_client, small_text, share_of, slots):
    link = share_of(small_text)
    slots.take(0, 1)
    assert every_entry_point(logged_in_client, small_text, link, "grep:^line 42$")["api"][0] == 429

    slots.free(1)

    answers = every_entry_point(logged_in_client, small_text, link, "grep:^line 42$")
    assert {name: status for name, (status, _) in answers.items()} == dict.fromkeys(answers, 200)
    assert answers["api"][1].endswith("\n42: line 42")
    assert sorted(os.listdir(slots.folder)) == ["expensive-0.lock", "expensive-1.lock"]


def test_a_request_waits_for_a_slot_and_goes_on_when_one_frees(
    logged_in_client, small_text, slots, limits, monkeypatch
):
    limits.BLOBVIEWER_EXPENSIVE_WAIT_SECONDS = 60
    slots.take(0, 1)
    waits = []

    def another_request_finishes(seconds: float) -> None:
        waits.append(seconds)
        if len(waits) == 3:  # the third time it finds every slot taken, one frees
            slots.free(0)

    monkeypatch.setattr(expensive, "_sleep", another_request_finishes)

    status, errors = page_answers(
        logged_in_client, reverse("blob_detail", args=[small_text]), "grep:line"
    )

    assert (status, errors) == (200, [])
    assert waits == [expensive.POLL_SECONDS] * 3


def test_any_selector_on_a_big_blob_needs_a_slot(logged_in_client, store, share_of, slots, limits):
    limits.BLOBVIEWER_EXPENSIVE_BYTES = 1000
    big = store.store_sync(Structured({"items": list(range(500))}))
    refresh_blob(big, store=store)
    slots.take(0, 1)

    answers = every_entry_point(logged_in_client, big, share_of(big), "key:items | slice:0..2")

    assert answers == busy()
    assert "blob over 1000 bytes" in busy_message()


def test_cheap_selectors_on_small_blobs_are_never_limited(
    logged_in_client, small_text, store, share_of, slots
):
    array = store.store_sync(Structured([{"id": n} for n in range(50)]))
    refresh_blob(array, store=store)
    slots.take(0, 1)

    for blob_id, selector in [
        (small_text, ""),
        (small_text, "lines:5-9"),
        (small_text, "lines:3-"),
        (array, "slice:2..4"),
        (array, ""),
    ]:
        answers = every_entry_point(logged_in_client, blob_id, share_of(blob_id), selector)
        assert {name: status for name, (status, _) in answers.items()} == dict.fromkeys(
            answers, 200
        ), selector


def test_a_bad_selector_is_answered_with_its_error_even_when_the_server_is_busy(
    logged_in_client, small_text, slots
):
    slots.take(0, 1)
    status, errors = page_answers(
        logged_in_client, reverse("blob_detail", args=[small_text]), "grep:("
    )
    assert status == 400
    assert errors and errors[0].startswith("grep: invalid regex")


def test_the_number_of_slots_is_a_setting(logged_in_client, small_text, slots, limits):
    limits.BLOBVIEWER_EXPENSIVE_CONCURRENCY = 3
    url = reverse("blob_detail", args=[small_text])
    slots.take(0, 1)
    assert page_answers(logged_in_client, url, "grep:line")[0] == 200
    slots.take(2)
    assert page_answers(logged_in_client, url, "grep:line")[0] == 429


# -- shared by every process and thread -----------------------------------------------------

HOLDER = """
import fcntl, os, sys
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT)
fcntl.flock(fd, fcntl.LOCK_EX)
print("held", flush=True)
sys.stdin.read()
"""


def test_another_process_holds_a_slot_until_it_dies_even_by_kill_9(
    logged_in_client, small_text, data_dir, limits
):
    limits.BLOBVIEWER_EXPENSIVE_CONCURRENCY = 1
    (data_dir / "locks").mkdir()
    worker = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(data_dir / "locks" / "expensive-0.lock")],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    )
    try:
        assert worker.stdout is not None and worker.stdout.readline() == b"held\n"
        url = reverse("api_inspect", args=[small_text])
        assert logged_in_client.get(url, {"selector": "grep:line"}).status_code == 429

        worker.kill()  # a crash: nothing in the process gets to clean up
        worker.wait(timeout=30)

        assert logged_in_client.get(url, {"selector": "grep:line"}).status_code == 200
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.wait(timeout=30)
        for pipe in (worker.stdin, worker.stdout):
            if pipe is not None:
                pipe.close()


def test_threads_of_one_process_share_the_slots_and_free_them_when_done(data_dir):
    grep = parse_selector("grep:x")
    inside, finish = threading.Barrier(3), threading.Event()
    failures: list[BaseException] = []

    def evaluation() -> None:
        try:
            with evaluation_slot(grep, 10):
                inside.wait(timeout=30)
                finish.wait(timeout=30)
        except BaseException as error:  # noqa: BLE001 - reported by the assertion below
            failures.append(error)

    threads = [threading.Thread(target=evaluation) for _ in range(2)]
    for thread in threads:
        thread.start()
    inside.wait(timeout=30)  # both threads hold a slot now

    with pytest.raises(Busy), evaluation_slot(grep, 10):
        pass

    finish.set()
    for thread in threads:
        thread.join(timeout=30)
    assert failures == []
    with evaluation_slot(grep, 10), evaluation_slot(grep, 10):  # both are free again
        pass


def test_a_slot_is_freed_when_the_evaluation_fails(data_dir, limits):
    limits.BLOBVIEWER_EXPENSIVE_CONCURRENCY = 1
    grep = parse_selector("grep:x")
    with pytest.raises(ValueError), evaluation_slot(grep, 10):
        raise ValueError("the evaluation failed")
    with evaluation_slot(grep, 10):
        pass


# -- what is expensive ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("selector", "size", "expected"),
    [
        ("grep:x", 10, True),
        ("key:log | grep:ERROR", 10, True),
        ("lines:1-5 | grep:def", 10, True),
        ("lines:1-5", 10, False),
        (None, 10, False),
        ("", 10, False),
        ("slice:0..3", 10 * 1024 * 1024, False),  # at the threshold, not over it
        ("slice:0..3", 10 * 1024 * 1024 + 1, True),
        (None, 10 * 1024 * 1024 + 1, True),
        ("grep:(", 10, False),  # does not parse: nothing is evaluated
    ],
)
def test_an_evaluation_is_expensive_for_grep_or_a_big_blob(
    selector: str | None, size: int, expected: bool
) -> None:
    assert is_expensive(selector, size) is expected
