"""How a session is ingested: the choices a caller makes (the command's flags, an upload's
owner), in one object that ingest passes down."""

from __future__ import annotations

from dataclasses import dataclass

from django.contrib.auth.models import AbstractBaseUser

from core.agent.policy import DEFAULT_POLICY, Policy


@dataclass(frozen=True)
class IngestOptions:
    """*policy*: when a tool output kept whole is promoted to a blob (docs/promotion.md).
    *force*: ingest a session `manage.py prune` deleted again (else SessionPruned).
    *owner*: the user a session this creates, or one that has none yet, belongs to; a
    session owned by another user is refused. None leaves ownership as it is.
    *rebuild*: re-derive a session an older importer version recorded, in place (see
    ingest_session). *claimed_only*: a session owned by no one is refused too, as the
    upload API refuses it (a pushed recording's sessions are its sender's only)."""

    policy: Policy = DEFAULT_POLICY
    force: bool = False
    owner: AbstractBaseUser | None = None
    rebuild: bool = False
    claimed_only: bool = False


DEFAULT_OPTIONS = IngestOptions()  # a plain ingest
