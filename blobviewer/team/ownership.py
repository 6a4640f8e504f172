"""Who may add to a session over the API, and who may fill in a blob it lacks.

Visibility is "team mode": every logged-in user sees every session. Ownership decides
only who may *add*: a session belongs to the user whose API token first recorded it (or
whom `manage.py ingest --owner` / `sessions chown` / the admin named). A token may add
items to its user's sessions only; sessions owned by nobody (ingested without an owner)
take no uploads at all.

A blob the store lacks may be sent by any token as long as no session references it
yet (agents upload blobs before their log); once a session references it, only the
owner of the session that referenced it first may supply its content (see
docs/http-api.md#who-may-add-to-a-session).

Both checks run inside the upload's transaction, before anything is stored.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable

from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractBaseUser
from django.db.models import Min
from django.utils import timezone

from blobviewer.models import BlobRef, Item, Session
from core.store import BlobStore
from core.store.blob_id import BlobId, blob_created_at


class NotYours(Exception):
    """The user may not add this; the message is one line for the client (HTTP 403)."""


class NoSuchUser(LookupError):
    """No user has this name; the message says so in one line."""


def user_named(name: str) -> AbstractBaseUser:
    """The user whose username is *name*, for the commands that give sessions an owner;
    raises NoSuchUser."""
    users = get_user_model()
    try:
        return users.objects.get(**{users.USERNAME_FIELD: name})
    except users.DoesNotExist:
        raise NoSuchUser(f"no user {name!r}: make one on /admin/ or with createsuperuser") from None


def claim_session(session_id: uuid.UUID, user: AbstractBaseUser) -> None:
    """Make *user* the owner of *session_id* if nobody recorded it yet, or check that they
    own it; raises NotYours otherwise. Must run inside a transaction, first in it: the
    session's row stays locked until the transaction ends.

    The claim is a conditional insert (INSERT … ON CONFLICT DO NOTHING) followed by a
    locking read, never "look, then insert": when two users' first uploads of one new id
    meet, the database lets one insert win and makes the other's insert wait for that
    transaction to end. If the winner commits, the loser's read then sees the winner as
    owner (403); if it rolls back, the loser's insert goes through and it owns the session.
    On SQLite, the insert being the transaction's first statement takes the write lock at
    once (waiting on the busy timeout), so uploads of a session take turns there too.
    The same lock serialises one owner's concurrent uploads, so the log file on disk is
    compared and replaced by one upload at a time.
    """
    # The placeholder row is only ever seen committed once the upload's ingest has filled
    # it in: the whole upload is one transaction, so a refused upload takes it back. Its
    # time is the one ingest falls back on for a header without one.
    placeholder = Session(
        id=session_id, owner_id=user.pk, created_at=blob_created_at(session_id) or timezone.now()
    )
    owners: list[int | None] = []
    while not owners:
        Session.objects.bulk_create([placeholder], ignore_conflicts=True)
        owners = list(
            Session.objects.select_for_update()
            .filter(id=session_id)
            .values_list("owner_id", flat=True)
        )
        # Empty: a prune deleted the session between the two statements. Claim it again;
        # ingest then finds its tombstone and the upload is answered 410.
    owner_id = owners[0]
    if owner_id == user.pk:
        return
    if owner_id is None:
        raise NotYours(
            f"session {session_id} has no owner (it was recorded without one), so no API "
            "token may add to it; an admin can give it one: manage.py sessions chown"
        )
    raise NotYours(
        f"session {session_id} belongs to another user; only its owner's API tokens may add to it"
    )


def check_blob_fills(
    blob_ids: Iterable[BlobId], *, user: AbstractBaseUser, store: BlobStore
) -> None:
    """Raise NotYours, naming the blob, if *user* sends the content of a blob that the
    store lacks and that a session of someone else's referenced first. Blobs the store has
    are left out: it keeps its copy (blobs are immutable), so sending one again fills
    nothing.

    "First" is the referencing item the database recorded first (the smallest item pk:
    given when an item is first recorded, kept when a rebuild derives it again, never
    chosen by a client). So the owner whose run lacked the blob can still send it later,
    and a user who mentions `[blob:<id>]` in a log of their own gains nothing by it,
    whether in an earlier upload or in this one. A session owned by nobody counts as
    someone else's. A blob no session references yet is open to every token (agents send
    blobs before their log, or with it): this upload's own log is then its first
    reference, and whoever sends it first decides its content, which is why an id's
    content is fixed once stored.
    """
    fills = [blob_id for blob_id in blob_ids if not store.exists_sync(blob_id)]
    if not fills:
        return
    first_items = (
        BlobRef.objects.filter(blob_id__in=fills)
        .values("blob_id")
        .annotate(first_item=Min("item_id"))
        .values_list("blob_id", "first_item")
    )
    first_item_of = dict(first_items)
    owner_of_item = dict(
        Item.objects.filter(pk__in=first_item_of.values()).values_list("pk", "session__owner_id")
    )
    refused = sorted(
        str(blob_id)
        for blob_id, item_id in first_item_of.items()
        if owner_of_item.get(item_id) != user.pk
    )
    if refused:
        more = f" (and {len(refused) - 1} more)" if len(refused) > 1 else ""
        raise NotYours(
            f"blob {refused[0]}{more}: missing from a session that is not yours; only the "
            "owner of the session that referenced it first may send it"
        )
