"""Syntax colouring for code and diffs in the reader, without marking anything safe.

Blob content is escaped by the template, always, coloured or not. Pygments only splits a
page's lines into tokens here: each line becomes pieces of `(css class, text)`, the class
named from Pygments' own token types (as its HTML formatter names them, drawn with the
prefix `pg-`), the text the blob's own; the template writes `<span class="pg-…">` around
the escaped text. Nothing from the request or the blob chooses a class, and there are no
inline styles (the Content-Security-Policy forbids them; colours come from site.css).

Only the lines of one page are coloured. A token that began above the page (the middle
of a long string or comment) may then be coloured as code — accepted. When the tokens do
not give back the page's lines exactly (the lexer read a line break we did not, e.g. a
lone "\\r"), the page stays plain.
"""

from __future__ import annotations

import posixpath
import re
import shlex
from collections.abc import Sequence
from typing import Any

from pygments.lexer import Lexer
from pygments.lexers import DiffLexer, get_lexer_for_filename
from pygments.lexers.special import TextLexer
from pygments.token import STANDARD_TYPES, _TokenType
from pygments.util import ClassNotFound

from blobviewer.timeline.tool_args import COMMAND_KEYS, PATH_KEYS, decoded_arguments

# A coloured line: its text in pieces, each with the CSS class of its token type ("" for
# plain text); the template draws them as <span class="pg-{class}">{text}</span>.
Piece = tuple[str, str]
# The markup a coloured piece adds around its text: <span class="pg-">…</span>.
_MARKUP_BYTES = len('<span class="pg-"></span>')
# Lexer options: keep every line as it is (by default Pygments strips leading and
# trailing blank lines and could expand tabs), so its lines are ours.
_OPTIONS = {"stripnl": False, "stripall": False, "ensurenl": True, "tabsize": 0}

# Commands that print a file as it is, so the file's name says what the output is.
_PRINTERS = frozenset({"cat", "head", "tail", "sed", "nl", "bat", "batcat", "less", "more"})
_DIFF_START = re.compile(r"^(?:diff --git |diff -|Index: |--- \S)", re.MULTILINE)
_HUNK = re.compile(r"^@@ -\d+(?:,\d+)? \+\d+(?:,\d+)? @@", re.MULTILINE)


def lexer_for_file(name: str) -> Lexer | None:
    """The lexer Pygments picks for a file called *name*; None for plain text or when it
    knows none."""
    base = posixpath.basename(name.strip())
    if not base or len(base) > 255:
        return None
    try:
        lexer = get_lexer_for_filename(base, **_OPTIONS)
    except (ClassNotFound, ValueError):
        return None
    return None if isinstance(lexer, TextLexer) else lexer


def diff_lexer() -> Lexer:
    return DiffLexer(**_OPTIONS)


def looks_like_diff(head: str) -> bool:
    """Whether a text that starts with *head* is a unified diff (a header and a hunk)."""
    return bool(_DIFF_START.search(head[:4096]) and _HUNK.search(head))


def file_named_by(tool: str, arguments: Any) -> str | None:
    """The file a tool call read, as its arguments name it: a path argument (`Read`,
    `view`, ...) or the last file argument of a command that prints files (`cat`,
    `sed -n 1,80p`, `head`); None when they name none."""
    args = decoded_arguments(arguments)
    if not isinstance(args, dict):
        return None
    for key in PATH_KEYS:
        if isinstance(path := args.get(key), str) and path.strip():
            return path
    for key in COMMAND_KEYS:
        command = args.get(key)
        if isinstance(command, list):
            command = " ".join(str(part) for part in command)
        if isinstance(command, str):
            return _printed_file(command)
    return None


def _printed_file(command: str) -> str | None:
    try:
        words = shlex.split(command, comments=True)
    except ValueError:
        return None
    if words[:2] in (["bash", "-lc"], ["bash", "-c"], ["sh", "-c"]) and len(words) == 3:
        return _printed_file(words[2])
    if not words or posixpath.basename(words[0]) not in _PRINTERS:
        return None
    if any(word in {"|", "&&", ";", "||"} for word in words):
        return None  # a pipeline prints something else
    files = [w for w in words[1:] if not w.startswith("-") and "." in posixpath.basename(w)]
    return files[-1] if files else None


def coloured_lines(
    lines: Sequence[str], lexer: Lexer, *, extra_budget: int
) -> list[tuple[Piece, ...] | None] | None:
    """Each of *lines* in coloured pieces, or None where colouring would take the page past
    *extra_budget* bytes of markup (those lines stay plain). None when the tokens do not
    give back the lines as they are."""
    if not lines:
        return []
    rows: list[list[Piece]] = [[]]
    for token_type, value in lexer.get_tokens("\n".join(lines) + "\n"):
        css = _css_class(token_type)
        for number, part in enumerate(value.split("\n")):
            if number:
                rows.append([])
            row = rows[-1]
            if not part:
                continue
            if row and row[-1][0] == css:  # one span for a run of one type, as Pygments does
                row[-1] = (css, row[-1][1] + part)
            else:
                row.append((css, part))
    if rows[-1] or len(rows) != len(lines) + 1:
        return None
    out: list[tuple[Piece, ...] | None] = []
    left = extra_budget
    for line, row in zip(lines, rows, strict=False):
        if "".join(text for _, text in row) != line:
            return None
        left -= sum(_MARKUP_BYTES + len(css) for css, _ in row if css)
        out.append(tuple(row) if left >= 0 else None)
    return out


def _css_class(token_type: _TokenType) -> str:
    """The class Pygments' HTML formatter gives a token type: the short name of its nearest
    standard type, followed by the names of the subtypes below it ("" for plain text)."""
    name = STANDARD_TYPES.get(token_type)
    below = ""
    while name is None:
        below = token_type[-1] + below
        token_type = token_type.parent
        name = STANDARD_TYPES.get(token_type)
    return name + below
