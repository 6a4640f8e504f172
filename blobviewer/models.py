"""What the site knows about recorded sessions, their items, and the blobs they reference.

The session logs and the blob store stay the source of truth; these tables index them so
pages can list, search and count without reading files.
"""

from __future__ import annotations

import hashlib
import secrets
from datetime import datetime, timedelta

from django.conf import settings
from django.db import models
from django.db.models.functions import Coalesce
from django.urls import reverse
from django.utils import timezone

from blobviewer.ingest.marks import PATH_CHARS

# How an evaluation run ended, by its verifier's reward (blobviewer.ingest.importers.harbor):
# a reward of 1 or more, of 0 or less, between, or none and an exception.
OUTCOMES = ("pass", "fail", "partial", "error")


class Session(models.Model):
    """One recorded agent run; `id` is the session log's own id."""

    id = models.UUIDField(primary_key=True)
    title = models.CharField(max_length=500, blank=True)
    model = models.CharField(max_length=200, blank=True)
    meta = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField()
    source_path = models.CharField(max_length=1000, blank=True, db_index=True)
    # Importers for other formats say what they were read from (e.g. "claude-code").
    source_format = models.CharField(max_length=50, default="blobviewer")
    item_count = models.PositiveIntegerField(default=0)
    tool_result_count = models.PositiveIntegerField(default=0)
    blob_count = models.PositiveIntegerField(default=0)
    # Bytes the tools produced, and bytes of tool output that entered the history; the
    # difference is what promotion kept out of the model's context.
    output_bytes_received = models.BigIntegerField(default=0)
    output_bytes_in_history = models.BigIntegerField(default=0)
    ingested_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    # The user whose API token first recorded the session, or whom `ingest --owner` named;
    # only the owner's token may add to it. None: nobody's (no token may add to it).
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="owned_sessions",
    )
    # The version of the importer that derived the items (0: recorded before versions
    # existed); `ingest --rebuild` re-derives sessions whose version is older.
    importer_version = models.PositiveIntegerField(default=0)
    # From the recording itself (its first and last times); None: it recorded no times.
    started_at = models.DateTimeField(null=True, blank=True)
    ended_at = models.DateTimeField(null=True, blank=True)
    duration = models.DurationField(null=True, blank=True)
    # Tool calls paired with their results, and how many of those failed.
    step_count = models.PositiveIntegerField(default=0)
    error_count = models.PositiveIntegerField(default=0)
    # How the run ended, where the recording says (e.g. "submitted", "end_turn").
    status = models.CharField(max_length=100, blank=True)
    # The secrets redacted out of its items (the sum of their `redactions`).
    redaction_count = models.PositiveIntegerField(default=0)
    # Evaluation runs (docs/evaluations.md), where the recording says: the job a trial
    # ran in, the task it worked on, and its outcome by the verifier's reward ("pass",
    # "fail", or "" when there is none); the reward itself when it is a number.
    job = models.CharField(max_length=200, blank=True)
    task = models.CharField(max_length=300, blank=True)
    outcome = models.CharField(max_length=10, blank=True)
    reward = models.FloatField(null=True, blank=True)
    # What the run cost in US dollars: the recording's own figure, else priced from its
    # tokens and model (docs/cost.md); None when neither is known.
    cost_usd = models.FloatField(null=True, blank=True)
    # Turns with tokens that have neither a recorded cost nor a price for the session's
    # model; while there are any, cost_usd stays None ("no price", docs/cost.md).
    unpriced_turns = models.PositiveIntegerField(default=0)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [
            models.Index(fields=["-created_at"]),
            models.Index(fields=["model"]),
            models.Index(fields=["job", "outcome"]),
            models.Index(fields=["task"]),
            # The list's default order ("Started", newest first: blobviewer.timeline.sort),
            # which a search walks until its page is full.
            models.Index(
                Coalesce("started_at", "ingested_at").desc(),
                models.F("id").desc(),
                name="session_started",
            ),
        ]

    def __str__(self) -> str:
        return self.title or str(self.id)

    def get_absolute_url(self) -> str:
        return reverse("session_detail", args=[self.id])

    @property
    def bytes_kept_out(self) -> int:
        return max(0, self.output_bytes_received - self.output_bytes_in_history)


class Item(models.Model):
    """One history item of a session: a user or assistant message, or a tool result."""

    class Type(models.TextChoices):
        USER = "user"
        ASSISTANT = "assistant"
        TOOL_RESULT = "tool_result"

    # No index of its own: item_unique_seq's (session, seq) serves every lookup by session.
    session = models.ForeignKey(
        Session, on_delete=models.CASCADE, related_name="items", db_index=False
    )
    seq = models.PositiveIntegerField()
    type = models.CharField(max_length=20, choices=Type.choices)
    at = models.DateTimeField(null=True, blank=True)
    text = models.TextField(blank=True)
    tool_calls = models.JSONField(default=list, blank=True)
    call_id = models.CharField(max_length=200, blank=True)
    tool = models.CharField(max_length=200, blank=True)
    output = models.TextField(blank=True)
    is_error = models.BooleanField(default=False)
    # Who a message really came from, when a recording says it was not its type's usual
    # author: a "user" item may be the system prompt, a demonstration, a harness note.
    role = models.CharField(max_length=50, blank=True)
    # Made by a sub-agent (Claude Code's sidechains), not the main conversation.
    sidechain = models.BooleanField(default=False)
    # SHA-256 of the item as the recording had it (before promotion): a later ingest of
    # the same seq must bring the same item, or it is another recording with this id.
    digest = models.CharField(max_length=64, blank=True)
    # Tool results only: UTF-8 bytes of the output in the history, and bytes the tool
    # produced (the blob's size when the output was promoted).
    output_bytes = models.BigIntegerField(default=0)
    received_bytes = models.BigIntegerField(default=0)
    # Assistant turns, where the recording has them: tokens the turn read (its whole
    # context, cached parts included) and wrote; None when not recorded.
    input_tokens = models.BigIntegerField(null=True, blank=True)
    output_tokens = models.BigIntegerField(null=True, blank=True)
    context_tokens = models.BigIntegerField(null=True, blank=True)
    # Of the tokens read, those served from the prompt cache and those written to it
    # (priced apart); None when not recorded.
    cache_read_tokens = models.BigIntegerField(null=True, blank=True)
    cache_write_tokens = models.BigIntegerField(null=True, blank=True)
    # The turn's cost in US dollars as the recording gives it (ATIF `cost_usd`, Claude
    # Code's `costUSD`); None when it gives none.
    cost_usd = models.FloatField(null=True, blank=True)
    # Tool results: from the call's turn to the result, where the recording has times.
    duration = models.DurationField(null=True, blank=True)
    # An importer's own note about the item (e.g. "persisted by Claude Code; full output
    # recovered from …"), shown on the step; never part of the output text.
    note = models.TextField(blank=True)
    # A tool result's title where its importer knows better than the call's arguments say
    # (a Codex poll: `npm test · poll 2`); search hits name the step by it.
    title = models.CharField(max_length=200, blank=True)
    # How many secrets were redacted out of it before it was stored (core.redaction).
    redactions = models.PositiveIntegerField(default=0)

    class Meta:
        ordering = ["session", "seq"]
        constraints = [
            models.UniqueConstraint(fields=["session", "seq"], name="item_unique_seq"),
        ]

    def __str__(self) -> str:
        return f"{self.session_id} #{self.seq} {self.type}"

    def get_absolute_url(self) -> str:
        return reverse("item_detail", args=[self.session_id, self.seq])


class Blob(models.Model):
    """A blob some item references: what the store holds under this id, or that it is missing."""

    id = models.UUIDField(primary_key=True)
    kind = models.CharField(max_length=20, blank=True)  # text, json_array, ...; "" if unknown
    size = models.BigIntegerField(null=True, blank=True)
    # Lines of a text, entries of an array, keys of an object; None for other kinds.
    count = models.BigIntegerField(null=True, blank=True)
    created_at = models.DateTimeField(null=True, blank=True)  # from the UUID v7
    missing = models.BooleanField(default=False)
    error = models.CharField(max_length=500, blank=True)  # e.g. the store says it is corrupt
    indexed_at = models.DateTimeField(null=True, blank=True)
    # Provenance (blobviewer.catalog.provenance): the tool result whose output is this blob's
    # summary (it begins `[blob:<id>]`; never an inspect result), linked when a session
    # that made it is ingested, and that step's call in one line (`Read src/app.py`),
    # kept here so that pages and the blob list never look for calls.
    made_by = models.ForeignKey(
        Item, null=True, blank=True, on_delete=models.SET_NULL, related_name="made_blobs"
    )
    made_by_title = models.CharField(max_length=200, blank=True)
    # The content's first line (a JSON blob: the start of its compact text), cut short;
    # read when the blob is indexed, never per request.
    preview = models.CharField(max_length=300, blank=True)
    # The blob that a rebuild re-derived this one's output into (`ingest --rebuild`): links
    # to this blob, share links included, lead there (blobviewer.catalog.blobs.replacement_of).
    replaced_by = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="replaces"
    )

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [
            models.Index(fields=["kind"]),
            # The blob list sorts by these (ties broken by id).
            models.Index(fields=["created_at", "id"], name="blob_created"),
            models.Index(fields=["size", "id"], name="blob_size"),
        ]

    def __str__(self) -> str:
        return str(self.id)

    def get_absolute_url(self) -> str:
        return reverse("blob_detail", args=[self.id])

    @property
    def count_label(self) -> str:
        """`1,204 lines`, `30 entries`, `5 keys`, or "" when there is nothing to count."""
        if self.count is None:
            return ""
        unit = {"text": "line", "json_array": "entry", "json_object": "key"}.get(self.kind)
        if unit is None:
            return ""
        plural = {"line": "lines", "entry": "entries", "key": "keys"}[unit]
        return f"{self.count:,} {unit if self.count == 1 else plural}"


class BlobRef(models.Model):
    """An item's `[blob:<id>]` reference. `session` repeats item.session for cheap counts."""

    # No index of its own: blobref_unique_item_blob's (item, blob) serves lookups by item.
    item = models.ForeignKey(
        Item, on_delete=models.CASCADE, related_name="blob_refs", db_index=False
    )
    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="blob_refs")
    blob = models.ForeignKey(Blob, on_delete=models.CASCADE, related_name="refs")

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["item", "blob"], name="blobref_unique_item_blob"),
        ]

    def __str__(self) -> str:
        return f"{self.item} -> {self.blob_id}"


def _new_share_token() -> str:
    return secrets.token_urlsafe(24)


def _default_expiry() -> datetime:
    return timezone.now() + timedelta(days=settings.SHARE_LINK_DAYS)


class ShareLinkQuerySet(models.QuerySet["ShareLink"]):
    def active(self) -> ShareLinkQuerySet:
        return self.filter(revoked_at__isnull=True, expires_at__gt=timezone.now())


class ShareLink(models.Model):
    """A link that shows one blob, through one selector, to anyone who has it, for a while."""

    token = models.CharField(max_length=64, unique=True, default=_new_share_token)
    blob = models.ForeignKey(Blob, on_delete=models.CASCADE, related_name="share_links")
    selector = models.CharField(max_length=1000, blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="share_links"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField(default=_default_expiry)
    revoked_at = models.DateTimeField(null=True, blank=True)
    # What the sharer says about it, shown to whoever opens the link (escaped, as all text).
    note = models.CharField(max_length=500, blank=True)

    objects = ShareLinkQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"share of {self.blob_id} by {self.created_by}"

    def get_absolute_url(self) -> str:
        return reverse("share_detail", args=[self.token])

    @property
    def is_revoked(self) -> bool:
        return self.revoked_at is not None

    @property
    def is_expired(self) -> bool:
        return self.expires_at <= timezone.now()

    @property
    def is_active(self) -> bool:
        return not self.is_revoked and not self.is_expired


API_TOKEN_PREFIX = "bv_"


def api_token_hash(secret: str) -> str:
    """SHA-256 of a token, hex. A token is 256 random bits, so a fast hash is enough: no
    one can guess it from the hash, and looking it up stays one indexed query."""
    return hashlib.sha256(secret.encode("utf-8", "surrogatepass")).hexdigest()


class ApiTokenQuerySet(models.QuerySet["ApiToken"]):
    def active(self) -> ApiTokenQuerySet:
        return self.filter(revoked_at__isnull=True, user__is_active=True)

    def issue(self, *, user: models.Model, name: str) -> tuple[ApiToken, str]:
        """A new token for *user* and its secret; only the hash is stored, so the caller
        shows the secret once and it can never be shown again."""
        secret = API_TOKEN_PREFIX + secrets.token_urlsafe(32)
        token = self.create(
            user=user, name=name, token_hash=api_token_hash(secret), prefix=secret[:10]
        )
        return token, secret

    def authenticate(self, secret: str) -> ApiToken | None:
        """The active token whose secret this is; None for unknown or revoked ones."""
        if not secret.startswith(API_TOKEN_PREFIX) or len(secret) > 200:
            return None
        matching = self.active().filter(token_hash=api_token_hash(secret))
        return matching.select_related("user").first()


class ApiToken(models.Model):
    """A per-user secret that lets an agent on another machine send sessions to the API."""

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens"
    )
    name = models.CharField(max_length=100)
    token_hash = models.CharField(max_length=64, unique=True, editable=False)
    prefix = models.CharField(max_length=16, editable=False)  # shown, to tell tokens apart
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)
    # The OTLP receiver's flood limit (blobviewer.otlp.flood): the clock minute (since the
    # epoch) whose requests are counted, and how many it has had.
    window_minute = models.BigIntegerField(default=0, editable=False)
    window_requests = models.PositiveIntegerField(default=0, editable=False)

    objects = ApiTokenQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"{self.name} ({self.prefix}…) of {self.user}"

    @property
    def is_revoked(self) -> bool:
        return self.revoked_at is not None

    def revoke(self) -> None:
        if self.revoked_at is None:
            self.revoked_at = timezone.now()
            self.save(update_fields=["revoked_at"])

    def mark_used(self) -> None:
        # An UPDATE of one column, so concurrent uploads never overwrite a revocation.
        self.last_used_at = timezone.now()
        ApiToken.objects.filter(pk=self.pk).update(last_used_at=self.last_used_at)


class TraceConversation(models.Model):
    """The conversation an OpenTelemetry trace belongs to, as a span of it named it
    (blobviewer.otlp.receiving): spans of the trace that name none, in later requests,
    join that conversation's session."""

    trace_id = models.CharField(max_length=32, primary_key=True)
    key = models.TextField()
    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="+")

    def __str__(self) -> str:
        return f"trace {self.trace_id} of {self.key}"


class PrunedSession(models.Model):
    """A tombstone: this session was deleted by `manage.py prune`. Ingest skips its
    recording (unless forced) and uploads for it answer 410."""

    id = models.UUIDField(primary_key=True)
    title = models.CharField(max_length=500, blank=True)
    pruned_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-pruned_at"]

    def __str__(self) -> str:
        return f"pruned session {self.id}"


class PrunedBlob(models.Model):
    """A tombstone: this blob was deleted by `manage.py prune`. Share links to it answer
    410, and an upload that brings it again is refused for that blob."""

    id = models.UUIDField(primary_key=True)
    pruned_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-pruned_at"]

    def __str__(self) -> str:
        return f"pruned blob {self.id}"


class SearchChunk(models.Model):
    """A piece of text that search reads (blobviewer.search.indexing): a session's title, an item's
    text, tool calls or output, or up to 64 K characters of a blob's text. `folded` is the
    text's Unicode case folding (`str.casefold()`) where lowering its ASCII capitals does
    not make it, else NULL (blobviewer.search.folding, migration 0013); SQLite finds the
    chunks that hold a query's trigrams through an FTS5 index kept in step by triggers
    (which chunks, not where) and checks their folded text, PostgreSQL uses a pg_trgm GIN
    index on the folded text. Chunks of one text overlap, so a match that crosses a chunk's edge
    is still inside one chunk."""

    class Source(models.TextChoices):
        TITLE = "title"
        TEXT = "text"
        CALLS = "calls"
        OUTPUT = "output"
        BLOB = "blob"

    # Titles and items name their session; a blob's chunks name only the blob, which
    # reaches its sessions through BlobRef (one blob may belong to many sessions).
    session = models.ForeignKey(
        Session, null=True, on_delete=models.CASCADE, related_name="search_chunks"
    )
    item = models.ForeignKey(
        Item, null=True, on_delete=models.CASCADE, related_name="search_chunks"
    )
    blob = models.ForeignKey(
        Blob, null=True, on_delete=models.CASCADE, related_name="search_chunks"
    )
    source = models.CharField(max_length=10, choices=Source.choices)
    start = models.BigIntegerField(default=0)  # where it starts in the text, in characters
    line = models.BigIntegerField(default=1)  # the line its first character is on
    text = models.TextField()
    folded = models.TextField(null=True)

    class Meta:
        # Titles: all of them (a short query searches titles only), and one session's
        # (each ingest checks it). On source alone, SQLite took that index for the latter
        # too, and read every session's title each ingest: ingest slowed as sessions grew.
        indexes = [models.Index(fields=["source", "session"], name="searchchunk_source_session")]

    def __str__(self) -> str:
        return f"{self.source} chunk at {self.start}"


class SearchedBlob(models.Model):
    """How much of a blob's text search sees: its chunks cover the first `indexed_bytes`
    (UTF-8) of `total_bytes`; a blob without this row has not been indexed for search."""

    blob = models.OneToOneField(
        Blob, primary_key=True, on_delete=models.CASCADE, related_name="search_index"
    )
    indexed_bytes = models.BigIntegerField()
    total_bytes = models.BigIntegerField()
    indexed_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"search index of {self.blob_id}"

    @property
    def complete(self) -> bool:
        return self.indexed_bytes >= self.total_bytes


class IngestedFile(models.Model):
    """A recording file as it was when `manage.py ingest` last read it without an error
    (blobviewer.ingest.unchanged): its identity, size, modification time and a digest of
    its first and last bytes, what shaped the ingest (importer versions, options), and
    how many sessions came from it. A file that still matches all of it is not read again."""

    path = models.CharField(max_length=PATH_CHARS, unique=True)
    device = models.BigIntegerField()
    inode = models.BigIntegerField()
    size = models.BigIntegerField()
    mtime_ns = models.BigIntegerField()
    edges = models.CharField(max_length=64)  # digest of the first and last EDGE bytes
    shape = models.CharField(max_length=64)
    sessions = models.PositiveIntegerField()
    # A JSON Lines recording read a line at a time (our own log, Claude Code, Codex):
    # where its last whole line ended (offset, line count) and a digest of the first EDGE
    # bytes and the EDGE bytes before that offset, so a file that has only grown since is
    # read from there on; for another agent's recording, what its importer carries over
    # to that read (importers.recording.Carried).
    format = models.CharField(max_length=50, blank=True)
    offset = models.BigIntegerField(default=0)
    lines = models.BigIntegerField(default=0)
    prefix = models.CharField(max_length=64, blank=True)
    carry = models.JSONField(null=True, blank=True)
    ingested_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return self.path
