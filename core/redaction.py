"""Secrets kept out of what is stored: tool outputs, call arguments and messages pass
`redact` before they become blobs, history items or session logs (docs/redaction.md).

A secret is replaced by `[redacted:<kind>]`. What counts as one is a table of patterns
for what secrets look like where they are issued: cloud and API keys by their issuers'
prefixes (AWS `AKIA…`, GCP `AIza…`, OpenAI `sk-proj-…`, Anthropic `sk-ant-…`, GitHub
`ghp_…`, GitLab `glpat-…`, Slack `xox…`, Stripe `sk_live_…`), Azure storage keys and
the AWS secret key after their names, PEM private key blocks, JWTs, the password in a URL
(`postgres://user:PASSWORD@host`), and the value of a `NAME=value` (or `NAME: value`)
whose name says it is a secret (SECRET, TOKEN, PASSWORD, PASSPHRASE, KEY, CREDENTIALS as
a part of the name: `DB_PASSWORD`, `API_KEY`, not `MAX_TOKENS` or `KEYBOARD`). There is
no generic high-entropy rule: hashes, UUIDs, blob ids and base64 data are never secrets
by their looks alone (detect-secrets' entropy plugins flagged 35,000 such strings in one
3 MB Claude Code recording, and read it at 0.1 MB/s).

The patterns work on decoded text and on JSON text alike (a secret in a JSON Lines
recording, with its newlines escaped as `\\n`), and never match a quote or a backslash, so
a redacted JSON text is still JSON. Redaction is deterministic: the same text redacts to
the same text, so a recording read again gives the same items.

`BLOBVIEWER_REDACT=off` turns it off (docs/redaction.md says what that risks).
"""

from __future__ import annotations

import os
import re
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import re2

# A value of `NAME=value` shorter than this is not taken for a secret (`TOKEN=1`).
_SHORTEST_VALUE = 8


# (kind, pattern, needles): the part to replace is the group `secret`, else the whole
# match. Each pattern begins with a literal, which the regular expression engine finds
# fast, and is only tried on a text holding one of its needles (a plain substring test).
# A match must begin at a word's start (checked apart: a leading `\b` would make the
# engine try the pattern at every character). Order matters where one pattern's match
# holds another's (an Anthropic key is an `sk-` key).
_PATTERNS: list[tuple[str, str, tuple[str, ...]]] = [
    (
        "private_key",
        r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----",
        ("PRIVATE KEY",),
    ),
    ("anthropic_key", r"sk-ant-[a-z0-9]{2,12}-[A-Za-z0-9_-]{20,}", ("sk-ant-",)),
    ("openai_key", r"sk-(?:proj|svcacct|admin)-[A-Za-z0-9_-]{20,}", ("sk-",)),
    ("openai_key", r"sk-[A-Za-z0-9]{20}T3BlbkFJ[A-Za-z0-9]{20}\b", ("T3BlbkFJ",)),
    ("openai_key", r"sk-[A-Za-z0-9]{48}\b", ("sk-",)),
    ("aws_access_key", r"(?:AKIA|ASIA|ABIA|ACCA)[0-9A-Z]{16}\b", ("AKIA", "ASIA", "ABIA", "ACCA")),
    (
        "aws_secret_key",
        r"(?i:aws_?secret_?access_?key)(?:\\?[\"'])?[ \t]*[=:][ \t]*(?:\\?[\"'])?"
        r"(?P<secret>[A-Za-z0-9/+]{40})(?![A-Za-z0-9/+])",
        ("AWS_SECRET", "aws_secret", "awsSecret", "AwsSecret"),
    ),
    ("gcp_api_key", r"AIza[0-9A-Za-z_-]{35}\b", ("AIza",)),
    ("azure_storage_key", r"AccountKey=(?P<secret>[A-Za-z0-9+/]{86}==)", ("AccountKey=",)),
    ("github_token", r"gh[pousr]_[A-Za-z0-9]{36,255}\b", ("ghp_", "gho_", "ghu_", "ghs_", "ghr_")),
    ("github_token", r"github_pat_[A-Za-z0-9_]{60,255}\b", ("github_pat_",)),
    ("gitlab_token", r"glpat-[A-Za-z0-9_-]{20,}", ("glpat-",)),
    ("slack_token", r"xox[abposr]-[A-Za-z0-9-]{10,}", ("xox",)),
    (
        "slack_webhook",
        r"hooks\.slack\.com/services/(?P<secret>T[A-Z0-9]+/B[A-Z0-9]+/[A-Za-z0-9]+)",
        ("hooks.slack.com",),
    ),
    ("stripe_key", r"sk_(?:live|test)_[A-Za-z0-9]{16,}\b", ("sk_live_", "sk_test_")),
    ("stripe_key", r"rk_(?:live|test)_[A-Za-z0-9]{16,}\b", ("rk_live_", "rk_test_")),
    (
        "jwt",
        r"(?<![A-Za-z0-9_-])eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}",
        ("eyJ",),
    ),
    (
        "url_password",
        r"://[^\s:/@\"'\\<>\[\]]{1,200}:(?P<secret>[^\s/@\"'\\<>\[\]]{1,200})@",
        ("://",),
    ),
]
_COMPILED = [
    (kind, re.compile(pattern, re.DOTALL), needles) for kind, pattern, needles in _PATTERNS
]
# Every pattern's needles in one expression: one pass tells which patterns to try.
# Which needles a text holds, in one pass: RE2 runs an alternation of literals as one
# automaton, four times as fast as Python's re, which tries each literal at every place
# its first character appears (0.3 s of the 0.5 s redaction took over 13 MB of outputs).
# RE2 reads UTF-8, which a text with a lone surrogate (JSON may escape one) has none of:
# such a text is searched with re.
_NEEDLE_PATTERN = "|".join(re.escape(n) for _, _, needles in _PATTERNS for n in needles)
_ANY_NEEDLE = re2.compile(_NEEDLE_PATTERN)
_ANY_NEEDLE_IN_ANY_TEXT = re.compile(_NEEDLE_PATTERN)
# `NAME=value` (or `NAME: value`, `"NAME": "value"`) where the name says secret: the
# parts of a name (split at `_`, `.`, `-` and where lower case turns upper) that make it
# one, and the parts before KEY that do (API_KEY, SECRET_KEY; not CACHE_KEY).
_SECRET_PARTS = {
    "secret",
    "token",
    "password",
    "passwd",
    "passphrase",
    "credential",
    "credentials",
    "apikey",
}
# The last parts of names that say where a secret is, or what it is called: not it.
_NOT_THE_SECRET = {"path", "file", "url", "uri", "dir", "endpoint", "name", "id", "type"}
_KEY_AFTER = {
    "api",
    "secret",
    "private",
    "access",
    "client",
    "master",
    "encryption",
    "signing",
    "auth",
    "app",
    "service",
    "account",
    "subscription",
    "license",
    "deploy",
    "ssh",
}
_NEEDLES = ("secret", "token", "passw", "passphrase", "credential", "pwd", "key")
_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-")
_NAME_PARTS = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")
_ASSIGNED = re.compile(
    r"(?:\\?[\"'])?[ \t]*[=:][ \t]*(?P<quote>\\?[\"'])?(?P<secret>[^\s\"'\\,;]{1,512})"
)
# How far a private key's END line may be from its BEGIN line; and, without one (a key
# cut off), its body: base64, whitespace and JSON's escaped line ends.
_PEM_REACH = 16000
_PEM_END = re.compile(r"-----END (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----")
_PEM_BODY = re.compile(r"(?:[A-Za-z0-9+/=\s]|\\[nrt]){0,16000}")
# A word's character: a match must not begin right after one.
_WORD = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-")
# Values of `NAME=value` that are code rather than a secret: calls, indexes, dotted names.
_EXPRESSION = re.compile(r"[()\[\]{}]|^[A-Za-z_$][\w$]*(?:\.[A-Za-z_$][\w$]*)+$")
# Values that are no secret: placeholders and references.
_PLACEHOLDER = re.compile(
    r"^(?:\$.*|<.*|\{.*|%.*|\*+|x+|\.+|-+|none|null|true|false|redacted.*|\[redacted.*"
    r"|changeme|your[_-].*|example.*|placeholder.*|-?\d+(?:\.\d+)?)$",
    re.IGNORECASE,
)


def redaction_enabled() -> bool:
    """Whether redaction is on: unless BLOBVIEWER_REDACT is `off` (or 0, false, no)."""
    return os.environ.get("BLOBVIEWER_REDACT", "").strip().lower() not in (
        "off",
        "0",
        "false",
        "no",
    )


@dataclass(frozen=True)
class Finding:
    """A secret found: its kind, and where it is in the text (start, end)."""

    kind: str
    start: int
    end: int


def find_secrets(text: str) -> list[Finding]:
    """The secrets in *text*, in order, none overlapping another."""
    lowered = text.lower()
    candidates: list[Finding] = []
    present = _needles_in(text)
    for kind, pattern, needles in _COMPILED if present else ():
        if present.isdisjoint(needles):
            continue
        for match in pattern.finditer(text):
            at = match.start()
            if kind != "url_password" and _inside_word(text, at):
                continue  # not where such a secret begins
            group = "secret" if "secret" in pattern.groupindex else 0
            if kind == "url_password" and _PLACEHOLDER.match(match.group("secret")):
                continue
            start, end = match.span(group)
            if kind == "private_key":
                end = _pem_end(text, end)
            candidates.append(Finding(kind, start, end))
    if any(needle in lowered for needle in _NEEDLES):
        candidates += _named_secrets(text, lowered)
    found: list[Finding] = []
    for finding in sorted(candidates, key=lambda f: (f.start, -f.end)):
        if found and finding.start < found[-1].end:  # overlapping: redact both, as one
            last = found[-1]
            found[-1] = Finding(last.kind, last.start, max(last.end, finding.end))
        else:
            found.append(finding)
    return found


def _needles_in(text: str) -> set[str]:
    try:
        return set(_ANY_NEEDLE.findall(text))
    except UnicodeEncodeError:  # a lone surrogate: not UTF-8
        return set(_ANY_NEEDLE_IN_ANY_TEXT.findall(text))


def _inside_word(text: str, at: int) -> bool:
    """Whether *at* is inside a word: after a word's character that is not the letter of
    a JSON escape (in JSON text a line starts after `\\n`)."""
    return at > 0 and text[at - 1] in _WORD and not _escaped(text, at - 1)


def _escaped(text: str, at: int) -> bool:
    """Whether the character at *at* is the letter of a JSON escape (`\\n`, `\\t`)."""
    return at > 0 and text[at - 1] == "\\" and text[at].isalpha()


def _pem_end(text: str, header_end: int) -> int:
    """Where the private key whose BEGIN line ends at *header_end* ends: after its END
    line, when one follows within _PEM_REACH and no quote comes between; else after the
    body that follows (a key cut off)."""
    end = text.find("-----END ", header_end, header_end + _PEM_REACH)
    if end >= 0 and '"' not in text[header_end:end] and "'" not in text[header_end:end]:
        closing = _PEM_END.match(text, end)
        if closing:
            return closing.end()
    body = _PEM_BODY.match(text, header_end)
    return body.end() if body else header_end


def _named_secrets(text: str, lowered: str) -> list[Finding]:
    """The values of `NAME=value` whose name says secret (see _named_value)."""
    found, names = [], set()
    for needle in _NEEDLES:
        at = lowered.find(needle)
        while at >= 0:
            start, end = at, at + len(needle)
            while start and text[start - 1] in _NAME_CHARS and not _escaped(text, start - 1):
                start -= 1
            while end < len(text) and text[end] in _NAME_CHARS:
                end += 1
            name = text[start:end].strip(".-")
            if start not in names and _says_secret(name):
                names.add(start)
                assigned = _ASSIGNED.match(text, start + len(text[start:end].rstrip(".-")))
                quoted = assigned is not None and bool(assigned.group("quote"))
                value = assigned.group("secret") if assigned else ""
                if assigned and _named_value(name, value, quoted=quoted):
                    found.append(Finding("named_secret", *assigned.span("secret")))
            at = lowered.find(needle, end)
    return found


def _says_secret(name: str) -> bool:
    parts = [part.lower() for part in _NAME_PARTS.findall(name)]
    if parts and parts[-1] in _NOT_THE_SECRET:
        return False  # TOKEN_URL, SSH_KEY_PATH: where a secret is, not the secret
    for index, part in enumerate(parts):
        if part in _SECRET_PARTS or (part == "key" and index and parts[index - 1] in _KEY_AFTER):
            return True
    return False


def _named_value(name: str, value: str, *, quoted: bool) -> bool:
    """Whether the value of a `NAME=value` whose name says secret is one: at least
    _SHORTEST_VALUE characters, no placeholder, no expression (a call, an index, a dotted
    name: code that reads a secret from elsewhere); and, unless the name is an
    environment variable's (UPPER_CASE) and the value stands alone, a literal in quotes
    that mixes letters and digits or is long (a variable in code named `token` or
    `apiKey` usually holds another variable, not a secret)."""
    if len(value) < _SHORTEST_VALUE or _PLACEHOLDER.match(value) or _EXPRESSION.search(value):
        return False
    mixed = any(c.isdigit() for c in value) and any(c.isalpha() for c in value)
    if name.isupper():
        return quoted or mixed or not value.isidentifier()
    return quoted and (mixed or len(value) >= 24)


def redact(text: str) -> tuple[str, Counter[str]]:
    """*text* with each secret replaced by `[redacted:<kind>]`, and the kinds replaced."""
    if not text:
        return text, Counter()
    found = find_secrets(text)
    if not found:
        return text, Counter()
    pieces, at = [], 0
    for finding in found:
        pieces += [text[at : finding.start], f"[redacted:{finding.kind}]"]
        at = finding.end
    pieces.append(text[at:])
    return "".join(pieces), Counter(finding.kind for finding in found)


def redact_value(value: Any) -> tuple[Any, Counter[str]]:
    """A JSON value with every string in it (keys aside) redacted, and the kinds: the
    string of a key that says secret (`{"api_key": "..."}`) as a `NAME=value` is."""
    counts: Counter[str] = Counter()

    def walk(item: Any, name: str = "") -> Any:
        if isinstance(item, str):
            if name and _says_secret(name) and _named_value(name, item, quoted=True):
                counts["named_secret"] += 1
                return "[redacted:named_secret]"
            redacted, kinds = redact(item)
            counts.update(kinds)
            return redacted
        if isinstance(item, list):
            return [walk(part) for part in item]
        if isinstance(item, dict):
            return {key: walk(part, str(key)) for key, part in item.items()}
        return item

    return walk(value), counts


def redact_title(title: str) -> str:
    """A session's title, redacted (unless redaction is off)."""
    return redact(title)[0] if redaction_enabled() else title


def redact_item(record: Mapping[str, Any]) -> dict[str, Any]:
    """A history item's record (docs/session-log.md) with its text, output, call
    arguments, note and title redacted, and `redactions` the secrets redacted out of it,
    now and before (a record that says how many its writer redacted: the Worker's); no
    `redactions` when there were none. The record as it is when redaction is off."""
    redacted = dict(record)
    counts: Counter[str] = Counter()
    if redaction_enabled():
        for field in ("text", "output", "note", "title"):
            if isinstance(redacted.get(field), str):
                redacted[field], kinds = redact(redacted[field])
                counts.update(kinds)
        if isinstance(redacted.get("tool_calls"), list):
            redacted["tool_calls"], kinds = redact_value(redacted["tool_calls"])
            counts.update(kinds)
    before = record.get("redactions")
    total = sum(counts.values()) + (before if isinstance(before, int) and before > 0 else 0)
    if total:
        redacted["redactions"] = total
    return redacted


def redact_text(text: str) -> tuple[str, int]:
    """*text* redacted (unless redaction is off), and how many secrets that took."""
    if not redaction_enabled():
        return text, 0
    redacted, kinds = redact(text)
    return redacted, sum(kinds.values())


def redact_lines(data: bytes) -> tuple[bytes, Counter[str]]:
    """*data* (lines of a recording or a log, as bytes) with each line's secrets redacted
    (unless redaction is off), bytes that are not UTF-8 kept as they are; and the kinds.
    A line at a time, so that the same line always redacts the same, wherever it falls."""
    if not redaction_enabled() or not data:
        return data, Counter()
    kinds: Counter[str] = Counter()
    lines = []
    for line in data.splitlines(keepends=True):
        text, found = redact(line.decode("utf-8", "surrogateescape"))
        kinds.update(found)
        lines.append(text.encode("utf-8", "surrogateescape") if found else line)
    return (b"".join(lines) if kinds else data), kinds


def redact_json(value: Any) -> tuple[Any, int]:
    """A JSON value redacted (unless redaction is off), and how many secrets that took."""
    if not redaction_enabled():
        return value, 0
    redacted, kinds = redact_value(value)
    return redacted, sum(kinds.values())
