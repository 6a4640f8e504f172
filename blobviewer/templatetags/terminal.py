"""Terminal escape codes (colours, cursor moves, window titles) in recorded outputs.

Tools run in a terminal colour their output; a browser would show each escape character as
a box. The pages drop them for display only: the store, the raw view and what the model
reads keep every byte. This filter returns plain text, never marked safe, so the template
still escapes what is left.
"""

from __future__ import annotations

import re

from django import template

register = template.Library()

_TERMINAL_CODE = re.compile(
    "\x1b(?:"
    r"\[[0-?]*[ -/]*[@-~]?"  # CSI: colours, cursor moves (the final byte may be cut off)
    r"|\][^\x07\x1b\n]*(?:\x07|\x1b\\)?"  # OSC: window titles, hyperlinks; ends BEL or ST
    r"|[ -/]*[0-~]?"  # the rest: charsets (ESC ( B), ESC 7, ...; or a lone ESC
    ")"
)


@register.filter
def strip_terminal_codes(text: str) -> str:
    """*text* without its ANSI CSI and OSC sequences and other escapes."""
    return _TERMINAL_CODE.sub("", text) if "\x1b" in text else text
