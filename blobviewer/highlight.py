"""Syntax colouring for code and diffs in the reader: the one place blob content is marked
safe, and so the one place to audit.

The rule everywhere else is that blob content is escaped by the template and never
marked safe. Colouring needs markup around the text, so here Pygments gets the *raw*
lines and escapes them itself (its HTML formatter escapes `&`, `<` and `>` in every
token; the only markup it adds is `<span class="pg-…">` with class names from its own
token types). Nothing else is ever passed through: no options from the request or the
blob, no line numbers or anchors (the template draws those), no inline styles (the
Content-Security-Policy forbids them; colours come from site.css by class).

Only the lines of one page are coloured. A token that began above the page (the middle
of a long string or comment) may then be coloured as code — accepted. Pygments closes
every span at the end of each line, so its output splits back into one piece of HTML
per line; when the count of pieces is not the count of lines (the lexer read a line
break we did not, e.g. a lone "\\r"), the page stays plain.
"""

from __future__ import annotations

import posixpath
import re
import shlex
from collections.abc import Sequence
from typing import Any

from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe
from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexer import Lexer
from pygments.lexers import DiffLexer, get_lexer_for_filename
from pygments.lexers.special import TextLexer
from pygments.util import ClassNotFound

from blobviewer.tool_args import COMMAND_KEYS, PATH_KEYS, parse_arguments

_FORMATTER = HtmlFormatter(nowrap=True, classprefix="pg-")
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
    args = parse_arguments(arguments)
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
) -> list[SafeString | None] | None:
    """Each of *lines* as coloured HTML, or None where colouring would take the page past
    *extra_budget* bytes of markup beyond the escaped text (those lines stay plain).
    None when Pygments does not give back one piece per line."""
    if not lines:
        return []
    html = highlight("\n".join(lines) + "\n", lexer, _FORMATTER)
    pieces = html.split("\n")
    if len(pieces) != len(lines) + 1 or pieces[-1]:
        return None
    out: list[SafeString | None] = []
    left = extra_budget
    for line, piece in zip(lines, pieces, strict=False):
        left -= len(piece.encode()) - len(escape(line).encode())
        # Marked safe: Pygments escaped this line's text itself (see the module's docstring).
        out.append(mark_safe(piece) if left >= 0 else None)  # noqa: S308
    return out
